// Pixel operations that need no resampling.
#pragma once

#include "prepfs/transform/crop_sampler.h"
#include "prepfs/transform/image.h"

namespace prepfs::transform {

// Mirror left-right in place (PIL's FLIP_LEFT_RIGHT, torchvision F.hflip).
void hflip(Image& img);

// The crop described by g, with zeros where it extends beyond the source (torchvision's
// center_crop pads with fill=0 before cropping).
Image crop_padded(ImageView src, const CenterCrop& g);

}  // namespace prepfs::transform

// libjpeg-turbo wrapper; see jpeg_decode.h for what it must match and why.
//
// Error handling: libjpeg reports fatal errors through error_exit, which must not return. We
// longjmp back into guarded(), whose frame (and the lambda it calls) holds no object with a
// destructor, so no C++ cleanup is skipped; the State owns the jpeg struct and destroys it in
// ~State. C++ objects (the output image) are created only between guarded calls.
#include "prepfs/transform/jpeg_decode.h"

#include "prepfs/transform/error.h"
#include "prepfs/transform/jpeg_header.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE and size_t
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <jerror.h>
#include <jpeglib.h>

namespace prepfs::transform {

using Kind = DecodeError::Kind;
// Rows of CMYK decoded at a time before conversion to RGB.
constexpr int kCmykStripRows = 16;


struct JpegReader::State {
  struct ErrorMgr {
    jpeg_error_mgr pub;  // first member: libjpeg hands us a jpeg_error_mgr*
    std::jmp_buf jmp;
    Kind kind;
    bool out_of_data;  // the error was the input running out
    char msg[JMSG_LENGTH_MAX];
  };
  struct ProgressMgr {
    jpeg_progress_mgr pub;  // first member, same reason
    int max_scans;
  };

  jpeg_decompress_struct cinfo{};
  ErrorMgr err{};
  jpeg_source_mgr src{};
  ProgressMgr progress{};
  std::span<const std::uint8_t> data;
  DecodeLimits limits;
  JpegInfo info;
  bool created = false;
  bool used = false;

  // Here rather than in ~JpegReader: a constructor that throws never runs the destructor of
  // its own class, but does destroy its members (this State).
  ~State() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

namespace {

using State = JpegReader::State;

State::ErrorMgr* err_of(j_common_ptr c) { return reinterpret_cast<State::ErrorMgr*>(c->err); }

[[noreturn]] void on_error_exit(j_common_ptr c) {
  State::ErrorMgr* e = err_of(c);
  if (c->err->msg_code == JERR_NO_BACKING_STORE) {
    // libjpeg asks for a backing store when its whole-image buffers would exceed
    // DecodeLimits::max_memory (max_memory_to_use): the image needs more memory than allowed.
    e->kind = Kind::kTooLarge;
    std::snprintf(e->msg, sizeof e->msg, "decoding needs more memory than the transform budget allows");
  } else {
    (*c->err->format_message)(c, e->msg);
  }
  std::longjmp(e->jmp, 1);
}

// Warnings (level < 0) are counted and otherwise ignored, as PIL ignores them; traces dropped.
// The default would print to stderr.
void on_emit_message(j_common_ptr c, int level) {
  if (level < 0) ++c->err->num_warnings;
}

void on_output_message(j_common_ptr) {}

// The whole file is in memory: running out of bytes means the file is truncated. (jpeg_mem_src
// would instead insert a fake EOI and carry on, which is PIL's LOAD_TRUNCATED_IMAGES behaviour,
// not its default.)
void src_init(j_decompress_ptr) {}
boolean src_fill(j_decompress_ptr d) {
  err_of(reinterpret_cast<j_common_ptr>(d))->kind = Kind::kTruncated;
  err_of(reinterpret_cast<j_common_ptr>(d))->out_of_data = true;
  ERREXIT(d, JERR_INPUT_EOF);
  return FALSE;  // not reached
}
void src_skip(j_decompress_ptr d, long n) {
  if (n <= 0) return;
  if (static_cast<unsigned long>(n) > d->src->bytes_in_buffer) {
    src_fill(d);
    return;
  }
  d->src->next_input_byte += n;
  d->src->bytes_in_buffer -= static_cast<std::size_t>(n);
}
void src_term(j_decompress_ptr) {}

// libjpeg calls this as it reads each part of the input; it enforces DecodeLimits::max_scans.
void on_progress(j_common_ptr c) {
  if (!c->is_decompressor) return;
  auto* d = reinterpret_cast<j_decompress_ptr>(c);
  auto* p = reinterpret_cast<State::ProgressMgr*>(c->progress);
  if (d->input_scan_number > p->max_scans) {
    State::ErrorMgr* e = err_of(c);
    e->kind = Kind::kCorrupt;
    std::snprintf(e->msg, sizeof e->msg, "progressive JPEG with more than %d scans", p->max_scans);
    std::longjmp(e->jmp, 1);
  }
}

// Runs f (libjpeg calls and plain loops only, no objects with destructors) and reports whether libjpeg raised
// an error. Not inlined so that setjmp's frame is this one and nothing else.
template <class F>
[[gnu::noinline]] bool guarded(State& s, F&& f) {
  if (setjmp(s.err.jmp) != 0) return false;
  f();
  return true;
}

[[noreturn]] void throw_from(const State& s) { throw DecodeError(s.err.kind, s.err.msg); }

// Pillow's MULDIV255: round(a * b / 255) for a, b in 0..255, the exact integer form it uses.
inline int muldiv255(int a, int b) {
  const int t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

// Pillow: unpack "CMYK;I" (invert all four channels), then Convert.c cmyk2rgb.
void cmyk_inverted_to_rgb(const std::uint8_t* in, std::uint8_t* out, std::size_t pixels) {
  for (std::size_t i = 0; i < pixels; ++i, in += 4, out += 3) {
    const int c = 255 - in[0], m = 255 - in[1], y = 255 - in[2], k = 255 - in[3];
    const int nk = 255 - k;
    out[0] = static_cast<std::uint8_t>(nk - muldiv255(c, nk));
    out[1] = static_cast<std::uint8_t>(nk - muldiv255(m, nk));
    out[2] = static_cast<std::uint8_t>(nk - muldiv255(y, nk));
  }
}

}  // namespace

JpegReader::JpegReader(std::span<const std::uint8_t> data, const DecodeLimits& limits) : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.data = data;
  s.limits = limits;
  // Our own header walk first: it classifies "not a JPEG" / "unsupported" the way PIL's
  // JpegImagePlugin does and checks max_pixels before libjpeg allocates anything.
  s.info = read_jpeg_info(data, limits.max_pixels);

  s.cinfo.err = jpeg_std_error(&s.err.pub);
  s.err.pub.error_exit = on_error_exit;
  s.err.pub.emit_message = on_emit_message;
  s.err.pub.output_message = on_output_message;
  s.err.kind = Kind::kCorrupt;

  s.src.init_source = src_init;
  s.src.fill_input_buffer = src_fill;
  s.src.skip_input_data = src_skip;
  s.src.resync_to_restart = jpeg_resync_to_restart;
  s.src.term_source = src_term;
  s.src.next_input_byte = data.data();
  s.src.bytes_in_buffer = data.size();

  s.progress.pub.progress_monitor = on_progress;
  s.progress.max_scans = limits.max_scans;

  if (!guarded(s, [&] { jpeg_create_decompress(&s.cinfo); })) throw_from(s);
  s.created = true;
  // libjpeg-turbo 2.1 honours max_memory_to_use for its whole-image (virtual) arrays, the only
  // allocations that grow with width x height: the coefficient buffers of progressive and
  // multi-scan files. Over it, it asks for a backing store, which we do not provide: an error.
  if (limits.max_memory > 0) {
    s.cinfo.mem->max_memory_to_use =
        static_cast<long>(std::min<std::uint64_t>(limits.max_memory, std::numeric_limits<long>::max()));
  }
  s.cinfo.src = &s.src;
  s.cinfo.progress = &s.progress.pub;
  if (!guarded(s, [&] { jpeg_read_header(&s.cinfo, TRUE); })) throw_from(s);

  // libjpeg read the same SOF as our walk; a disagreement would mean a parser bug, and the
  // pixel limit must hold for what libjpeg will allocate.
  if (std::uint64_t{s.cinfo.image_width} * s.cinfo.image_height > limits.max_pixels ||
      s.cinfo.image_width != s.info.width || s.cinfo.image_height != s.info.height) {
    throw DecodeError(Kind::kCorrupt, "inconsistent frame header");
  }
  if (s.cinfo.num_components != s.info.components) {
    throw DecodeError(Kind::kUnsupported, "unexpected number of components");
  }
}

JpegReader::~JpegReader() = default;

int JpegReader::width() const noexcept { return static_cast<int>(s_->info.width); }
int JpegReader::height() const noexcept { return static_cast<int>(s_->info.height); }
int JpegReader::components() const noexcept { return s_->info.components; }

std::pair<int, int> JpegReader::scaled_size(int scale_eighths) const {
  const auto up = [&](std::uint32_t v) {
    return static_cast<int>((std::uint64_t{v} * static_cast<unsigned>(scale_eighths) + 7) / 8);
  };
  return {up(s_->info.width), up(s_->info.height)};
}

DecodedRegion JpegReader::decode(int scale_eighths, std::optional<Rect> region, bool read_rest) {
  return decode_impl(scale_eighths, region, {}, read_rest);
}

void JpegReader::decode_into(std::span<std::uint8_t> rgb) {
  if (rgb.size() < std::size_t{s_->info.width} * s_->info.height * 3) {
    throw std::length_error("JpegReader::decode_into: buffer too small");
  }
  decode_impl(8, std::nullopt, rgb);
}

DecodedRegion JpegReader::decode_impl(int scale_eighths, std::optional<Rect> region, std::span<std::uint8_t> dest,
                                      bool read_rest) {
  State& s = *s_;
  if (s.used) throw DecodeError(Kind::kCorrupt, "JpegReader::decode called twice");
  s.used = true;
  if (scale_eighths < 1 || scale_eighths > 8) scale_eighths = 8;

  jpeg_decompress_struct& ci = s.cinfo;
  const bool cmyk = ci.num_components == 4;
  // Explicit defaults: this is what makes the bytes equal PIL's (see header comment).
  ci.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  ci.dct_method = JDCT_ISLOW;
  ci.do_fancy_upsampling = TRUE;
  ci.do_block_smoothing = TRUE;
  ci.scale_num = static_cast<unsigned>(scale_eighths);
  ci.scale_denom = 8;

  if (!guarded(s, [&] { jpeg_start_decompress(&ci); })) throw_from(s);
  const int fw = static_cast<int>(ci.output_width);
  const int fh = static_cast<int>(ci.output_height);

  // Rows and columns to decode.
  int x0 = 0, x1 = fw, y0 = 0, y1 = fh;
  if (region) {
    const int mx = ci.max_h_samp_factor * ci.min_DCT_scaled_size;  // one iMCU, scaled
    const int my = ci.max_v_samp_factor * ci.min_DCT_scaled_size;
    const int rx0 = std::clamp(region->x, 0, fw);
    const int ry0 = std::clamp(region->y, 0, fh);
    const int rx1 = std::clamp(region->x + region->width, rx0, fw);
    const int ry1 = std::clamp(region->y + region->height, ry0, fh);
    x0 = std::max(0, rx0 - mx);
    x1 = std::min(fw, rx1 + mx);
    y0 = std::max(0, ry0 - my);
    y1 = std::min(fh, ry1 + my);
    if (x1 <= x0 || y1 <= y0) throw DecodeError(Kind::kCorrupt, "empty decode region");
  }
  JDIMENSION xoff = static_cast<JDIMENSION>(x0);
  JDIMENSION width = static_cast<JDIMENSION>(x1 - x0);
  const bool partial = x0 > 0 || x1 < fw || y0 > 0 || y1 < fh;
  if (!guarded(s, [&] {
        if (xoff > 0 || width < ci.output_width) jpeg_crop_scanline(&ci, &xoff, &width);
        if (y0 > 0) jpeg_skip_scanlines(&ci, static_cast<JDIMENSION>(y0));
      })) {
    throw_from(s);
  }

  DecodedRegion out;
  out.x = static_cast<int>(xoff);
  out.y = y0;
  out.frame_width = fw;
  out.frame_height = fh;
  const int w = static_cast<int>(ci.output_width);  // after cropping
  const int h = y1 - y0;
  // Either the caller's buffer (whole frame, checked by decode_into) or a new image.
  std::uint8_t* rgb = dest.data();
  if (rgb == nullptr) {
    out.image = Image(w, h);
    rgb = out.image.pixels.data();
  }

  // libjpeg writes whole output rows. CMYK (4 bytes per pixel) is read a strip of rows at a time
  // into a small buffer and converted as it comes: a whole-image CMYK buffer would cost 4 bytes
  // per pixel on top of the output.
  const std::size_t rgb_row = static_cast<std::size_t>(w) * 3;
  const std::size_t row_bytes = static_cast<std::size_t>(w) * (cmyk ? 4 : 3);
  const int strip = cmyk ? std::min(h, kCmykStripRows) : h;
  std::vector<std::uint8_t> cmyk_buf(cmyk ? row_bytes * static_cast<std::size_t>(strip) : 0);
  std::vector<JSAMPROW> rows(static_cast<std::size_t>(strip));
  for (int y = 0; y < strip; ++y) {
    rows[static_cast<std::size_t>(y)] =
        cmyk ? cmyk_buf.data() + row_bytes * static_cast<std::size_t>(y) : rgb + rgb_row * static_cast<std::size_t>(y);
  }
  std::uint8_t* cmyk_strip = cmyk_buf.data();
  // Where the last row of the frame goes when it lies below the region (see below).
  std::vector<std::uint8_t> last_row(partial ? row_bytes : 0);
  JSAMPROW last_row_ptr = last_row.data();

  const JDIMENSION end = static_cast<JDIMENSION>(y1);
  JSAMPROW* row_ptrs = rows.data();
  if (!guarded(s, [&] {
        while (ci.output_scanline < end) {
          const JDIMENSION done = ci.output_scanline - static_cast<JDIMENSION>(y0);
          const JDIMENSION want = cmyk ? std::min<JDIMENSION>(static_cast<JDIMENSION>(strip), end - ci.output_scanline)
                                       : end - ci.output_scanline;
          const JDIMENSION got = jpeg_read_scanlines(&ci, cmyk ? row_ptrs : row_ptrs + done, want);
          // 0 rows only happens with a suspending source; never loop on it.
          if (got == 0) ERREXIT(&ci, JERR_INPUT_EOF);
          if (cmyk) cmyk_inverted_to_rgb(cmyk_strip, rgb + rgb_row * done, static_cast<std::size_t>(w) * got);
        }
        // Below the region, consume the rest of the image exactly as a full decode does, so
        // that a file is an error here iff it is one for the full decode (and for PIL), and a
        // file is equally good or bad in decoded/ and augmented/. jpeg_skip_scanlines
        // entropy-decodes the iMCU rows it skips (no IDCT, upsampling or colour conversion: most
        // of a crop's saving stays), except that a skip reaching the last row returns without
        // reading anything; so the last row is read for real, into last_row.
        if (partial && read_rest && ci.output_scanline < ci.output_height) {
          const JDIMENSION left = ci.output_height - ci.output_scanline;
          if (left > 1) jpeg_skip_scanlines(&ci, left - 1);
          while (ci.output_scanline < ci.output_height) {
            if (jpeg_read_scanlines(&ci, &last_row_ptr, 1) == 0) ERREXIT(&ci, JERR_INPUT_EOF);
          }
        }
      })) {
    throw_from(s);
  }
  // Then on to EOI, reading the markers after the scan data. PIL does this with a suspending
  // source and ignores a suspension here (JpegDecode.c does not look at jpeg_finish_decompress's
  // result): input that ends inside a segment after the image is no error for it, while a marker
  // that is wrong there (a second scan in a baseline file, say) is. So running out of input while
  // finishing is accepted, and any other error is not.
  if (partial && !read_rest && ci.output_scanline < ci.output_height) {
    jpeg_abort_decompress(&ci);  // the caller knows the rest decodes (see decode())
    return out;
  }
  s.err.out_of_data = false;
  if (!guarded(s, [&] { jpeg_finish_decompress(&ci); }) && !s.err.out_of_data) throw_from(s);
  return out;
}

Image decode_jpeg(std::span<const std::uint8_t> data, const DecodeLimits& limits) {
  JpegReader reader(data, limits);
  return std::move(reader.decode().image);
}

}  // namespace prepfs::transform

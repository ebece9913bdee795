// PPM and NPY writers. The expected NPY header below is the literal numpy 1.24's numpy.save
// produced for np.zeros((375, 500, 3), np.uint8); test_reference.cc compares whole files with
// numpy.save / PIL output made at test time.
#include "prepfs/transform/encoders.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace prepfs::transform {
namespace {

TEST(Encoders, PpmIsPilsP6) {
  Image img(3, 2);
  for (std::size_t k = 0; k < img.pixels.size(); ++k) img.pixels[k] = static_cast<std::uint8_t>(k);
  const auto out = encode(OutputFormat::kPpm, img.view());
  const std::string head = "P6\n3 2\n255\n";
  ASSERT_EQ(out.size(), head.size() + 18);
  EXPECT_EQ(std::string(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(head.size())), head);
  EXPECT_EQ(std::vector<std::uint8_t>(out.begin() + static_cast<std::ptrdiff_t>(head.size()), out.end()),
            std::vector<std::uint8_t>(img.pixels.begin(), img.pixels.end()));
  EXPECT_EQ(encoded_size(OutputFormat::kPpm, 3, 2), out.size());
  EXPECT_EQ(encoded_size(OutputFormat::kPpm, 500, 375), 15u + 562500u);
}

TEST(Encoders, NpyHeaderIsNumpySaves) {
  std::string want("\x93NUMPY\x01\x00\x76\x00", 10);
  want += "{'descr': '|u1', 'fortran_order': False, 'shape': (375, 500, 3), }";
  want += std::string(128 - 1 - want.size(), ' ') + "\n";
  EXPECT_EQ(encoded_header(OutputFormat::kNpy, 500, 375), want);
  EXPECT_EQ(want.size(), 128u);
  EXPECT_EQ(encoded_size(OutputFormat::kNpy, 500, 375), 128u + 562500u);
}

TEST(Encoders, NpyHeaderAlignsDataTo64Bytes) {
  for (auto [w, h] : {std::pair{1, 1}, {224, 224}, {65500, 65500}, {7, 12345}, {99999, 1}}) {
    const std::string head = encoded_header(OutputFormat::kNpy, w, h);
    EXPECT_EQ(head.size() % 64, 0u) << w << "x" << h;
    EXPECT_EQ(head.back(), '\n');
    const std::size_t len = static_cast<unsigned char>(head[8]) | (static_cast<unsigned char>(head[9]) << 8);
    EXPECT_EQ(len + 10, head.size());
    const std::string shape = "(" + std::to_string(h) + ", " + std::to_string(w) + ", 3)";
    EXPECT_NE(head.find(shape), std::string::npos);
  }
}

TEST(Encoders, EncodeIntoAndViews) {
  const Image img = testing::synthetic_image(10, 7, 2);
  const ImageView v = img.view().sub(2, 1, 5, 4);  // strided view
  for (OutputFormat f : {OutputFormat::kPpm, OutputFormat::kNpy}) {
    std::vector<std::uint8_t> buf(encoded_size(f, 5, 4));
    EXPECT_EQ(encode_into(f, v, buf), buf.size());
    EXPECT_EQ(buf, encode(f, copy_image(v).view()));
    std::vector<std::uint8_t> small(buf.size() - 1);
    EXPECT_THROW(encode_into(f, v, small), std::length_error);
  }
}

TEST(Encoders, FormatNames) {
  EXPECT_EQ(parse_output_format("ppm"), OutputFormat::kPpm);
  EXPECT_EQ(parse_output_format("npy"), OutputFormat::kNpy);
  EXPECT_FALSE(parse_output_format("png").has_value());
  EXPECT_STREQ(extension(OutputFormat::kNpy), "npy");
}

}  // namespace
}  // namespace prepfs::transform

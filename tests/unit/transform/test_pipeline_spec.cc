// Spec parsing: accepted spellings, canonical form, hash definition, errors, output sizes.
#include "prepfs/transform/error.h"
#include "prepfs/transform/pipeline_spec.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <set>

#include <xxhash.h>

namespace prepfs::transform {
namespace {

TEST(PipelineSpec, DefaultIsTorchvisionsTrainingTransform) {
  const PipelineSpec s = PipelineSpec::parse(kDefaultAugmentSpec);
  EXPECT_EQ(s.canonical(), "rrc(224,0.08,1,0.75,1.3333333333333333);hflip(0.5)");
  ASSERT_EQ(s.ops().size(), 2u);
  const auto& r = std::get<RrcOp>(s.ops()[0]);
  EXPECT_EQ(r.size, (Size{224, 224}));
  EXPECT_EQ(r.params.scale_lo, 0.08);
  EXPECT_EQ(r.params.scale_hi, 1.0);
  EXPECT_EQ(r.params.ratio_lo, 3.0 / 4.0);
  EXPECT_EQ(r.params.ratio_hi, 4.0 / 3.0);  // exactly Python's 4 / 3
  EXPECT_EQ(std::get<HflipOp>(s.ops()[1]).p, 0.5);
}

TEST(PipelineSpec, EquivalentSpellingsShareCanonicalFormAndHash) {
  const PipelineSpec d = PipelineSpec::parse(kDefaultAugmentSpec);
  for (const char* t : {"rrc(224);hflip()", " rrc ( 224 , 0.08 , 1 , 0.75 , 4/3 ) ; hflip(0.5) ;",
                        "rrc(224x224,8e-2,1.0,3/4,4/3);hflip(1/2)"}) {
    const PipelineSpec s = PipelineSpec::parse(t);
    EXPECT_EQ(s.canonical(), d.canonical()) << t;
    EXPECT_EQ(s.hash(), d.hash()) << t;
  }
  EXPECT_EQ(PipelineSpec::parse("resize( 256 );center_crop(224x224)").canonical(), "resize(256);center_crop(224)");
  EXPECT_EQ(PipelineSpec::parse("center_crop(100x200)").canonical(), "center_crop(100x200)");
  EXPECT_EQ(PipelineSpec::parse("resize(10x20)").canonical(), "resize(10x20)");
  EXPECT_EQ(PipelineSpec::parse("resize(256x256)").canonical(), "resize(256x256)");
}

// The hash is defined as XXH3-64 of the canonical text seeded with kTransformVersion; checking it
// against libxxhash directly pins that definition (cache keys persist on the SSD across builds).
TEST(PipelineSpec, HashIsXxh3OfTheCanonicalFormSeededWithTheVersion) {
  const std::string canon = "rrc(224,0.08,1,0.75,1.3333333333333333);hflip(0.5)";
  EXPECT_EQ(PipelineSpec::parse(kDefaultAugmentSpec).hash(),
            XXH3_64bits_withSeed(canon.data(), canon.size(), kTransformVersion));
  EXPECT_EQ(kTransformVersion, 1u);
}

TEST(PipelineSpec, DifferentSpecsHashDifferently) {
  const char* specs[] = {kDefaultAugmentSpec.data(),
                         "rrc(224)",
                         "rrc(225);hflip()",
                         "rrc(224,0.1,1);hflip()",
                         "rrc(224);hflip(0.4)",
                         "hflip();rrc(224)",
                         "resize(256);center_crop(224)",
                         "resize(256x256);center_crop(224)"};
  std::set<std::uint64_t> seen;
  for (const char* s : specs) seen.insert(PipelineSpec::parse(s).hash());
  EXPECT_EQ(seen.size(), std::size(specs));
}

TEST(PipelineSpec, BadSpecsSayWhereAndWhy) {
  struct Bad {
    const char* text;
    std::size_t pos;
    const char* says;
  };
  for (const Bad b : {Bad{"", 0, "empty"},
                      Bad{"   ", 3, "empty"},
                      Bad{"rrc", 3, "expected '('"},
                      Bad{"rrc(", 4, "number"},
                      Bad{"rrc()", 0, "wrong number"},
                      Bad{"rrc(0)", 4, "between 1 and"},
                      Bad{"rrc(224,0.5)", 0, "wrong number"},
                      Bad{"rrc(224,0.9,0.1)", 8, "scale"},
                      Bad{"rrc(224,0,1)", 8, "scale"},
                      Bad{"rrc(224,0.08,1,2,1)", 15, "ratio"},
                      // Ratios past what a float holds (1e300 became +inf in the sampler: UB).
                      Bad{"rrc(224,0.08,1,0.75,1e300)", 15, "ratio"},
                      Bad{"rrc(224,0.08,1,1e-300,1)", 15, "ratio"},
                      Bad{"rrc(224,0.08,1,0.75,1e300/1e-300)", 20, "out of range"},
                      Bad{"rrc(2.5)", 4, "size"},
                      Bad{"blur(3)", 0, "unknown op 'blur'"},
                      Bad{"resize(2.5)", 7, "N or HxW"},
                      Bad{"resize(10x)", 10, "number"},
                      Bad{"resize(1x2.5)", 7, "two integers"},
                      Bad{"center_crop(20000)", 12, "between 1 and 16384"},
                      Bad{"hflip(1.5)", 6, "0 <= p <= 1"},
                      Bad{"hflip(0.5,1)", 0, "wrong number"},
                      Bad{"rrc(224);;hflip()", 9, "op name"},
                      Bad{"rrc(224) hflip()", 9, "';'"},
                      Bad{"hflip(1/0)", 8, "division by zero"},
                      Bad{"hflip(224x224)", 6, "not a size"},
                      Bad{"Rrc(224)", 0, "op name"}}) {
    try {
      PipelineSpec::parse(b.text);
      ADD_FAILURE() << "accepted: " << b.text;
    } catch (const SpecError& e) {
      EXPECT_EQ(e.err(), EINVAL);
      EXPECT_EQ(e.pos(), b.pos) << b.text << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(b.says), std::string::npos) << b.text << ": " << e.what();
    }
  }
}

TEST(PipelineSpec, OutputSizeDependsOnlyOnTheSourceSize) {
  EXPECT_EQ(PipelineSpec::parse(kDefaultAugmentSpec).output_size(500, 375), (Size{224, 224}));
  EXPECT_EQ(PipelineSpec::parse(kDefaultAugmentSpec).output_size(17, 9), (Size{224, 224}));
  EXPECT_EQ(PipelineSpec::parse("resize(256);center_crop(224)").output_size(500, 375), (Size{224, 224}));
  EXPECT_EQ(PipelineSpec::parse("resize(256)").output_size(500, 375), (Size{341, 256}));
  EXPECT_EQ(PipelineSpec::parse("resize(100x50)").output_size(500, 375), (Size{50, 100}));
  EXPECT_EQ(PipelineSpec::parse("hflip()").output_size(500, 375), (Size{500, 375}));
  EXPECT_EQ(PipelineSpec::parse("center_crop(300x200)").output_size(5, 5), (Size{200, 300}));
  EXPECT_EQ(PipelineSpec::parse("rrc(64x32);resize(16)").output_size(1000, 1000), (Size{16, 32}));
}

}  // namespace
}  // namespace prepfs::transform

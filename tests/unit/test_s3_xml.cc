// The S3 XML parser and the key -> tree mapping: pure functions, no network.
#include <gtest/gtest.h>

#include <random>

#include "prepfs/common/error.h"
#include "prepfs/source/s3_keys.h"
#include "prepfs/source/s3_source.h"
#include "prepfs/source/s3_xml.h"

using namespace prepfs;
using namespace prepfs::s3;

namespace {

const char* kPage = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bucket</Name><Prefix>data/</Prefix><KeyCount>3</KeyCount><MaxKeys>1000</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
  <Contents>
    <Key>data/a &amp; b.jpg</Key>
    <LastModified>2009-10-12T17:50:30.000Z</LastModified>
    <ETag>&quot;fba9dede5f27731c9771645a39863328&quot;</ETag>
    <Size>434234</Size>
    <StorageClass>STANDARD</StorageClass>
  </Contents>
  <Contents><Key>data/sub/&#x00FC;ber&#46;txt</Key><LastModified>2024-01-02T03:04:05.678Z</LastModified>
    <ETag>"abc-2"</ETag><Size>0</Size><Owner><ID>x</ID></Owner></Contents>
  <!-- a comment with <Contents> inside -->
  <Contents><Key><![CDATA[data/<raw>]]></Key><Size>7</Size></Contents>
</ListBucketResult>)";

}  // namespace

TEST(S3Xml, ParsesAListObjectsV2Page) {
  ListPage p = parse_list_objects_v2(kPage);
  ASSERT_EQ(p.objects.size(), 3u);
  EXPECT_TRUE(p.truncated);
  EXPECT_EQ(p.next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
  EXPECT_EQ(p.objects[0].key, "data/a & b.jpg");
  EXPECT_EQ(p.objects[0].size, 434234u);
  EXPECT_EQ(p.objects[0].etag, "fba9dede5f27731c9771645a39863328");
  EXPECT_EQ(p.objects[0].last_modified_ns, 1255369830ll * 1'000'000'000);
  EXPECT_EQ(p.objects[1].key,
            "data/sub/\xc3\xbc"
            "ber.txt");
  EXPECT_EQ(p.objects[1].etag, "abc-2");
  EXPECT_EQ(p.objects[1].last_modified_ns, 1704164645ll * 1'000'000'000 + 678'000'000);
  EXPECT_EQ(p.objects[2].key, "data/<raw>");
}

TEST(S3Xml, DecodesUrlEncodedKeys) {
  ListPage p = parse_list_objects_v2(
      "<ListBucketResult><EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>"
      "<Contents><Key>a/b+c%2Bd%25%01</Key><Size>1</Size></Contents></ListBucketResult>");
  ASSERT_EQ(p.objects.size(), 1u);
  EXPECT_EQ(p.objects[0].key, std::string("a/b c+d%\x01"));
  EXPECT_FALSE(p.truncated);
}

TEST(S3Xml, RejectsMalformedInput) {
  for (const char* bad : {
           "",
           "<",
           "<ListBucketResult>",
           "<ListBucketResult></Other>",
           "text<ListBucketResult/>",
           "<ListBucketResult><Contents><Key>a</Key></Contents></ListBucketResult>",  // no Size
           "<ListBucketResult><Contents><Key>a</Key><Size>-1</Size></Contents></ListBucketResult>",
           "<ListBucketResult><Contents><Key>&bogus;</Key><Size>1</Size></Contents></ListBucketResult>",
           "<ListBucketResult><Contents><Key>&#0;</Key><Size>1</Size></Contents></ListBucketResult>",
           "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",  // no token
           "<ListBucketResult/><ListBucketResult/>",
           "<Error><Code>AccessDenied</Code></Error>",
           "<!DOCTYPE x [<!ENTITY a 'b'>]><ListBucketResult/>",
       }) {
    EXPECT_THROW(parse_list_objects_v2(bad), Error) << bad;
  }
  std::string deep;
  for (int i = 0; i < 100; i++) deep += "<a>";
  EXPECT_THROW(walk_xml(deep, [](auto&, auto&) {}), Error);
}

TEST(S3Xml, SurvivesRandomBytes) {
  // A cheap in-process fuzz: mutations of a valid page never crash, they parse or throw Error.
  std::mt19937 rng(7);
  std::string base = kPage;
  for (int round = 0; round < 3000; round++) {
    std::string s = base;
    int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; e++) {
      size_t at = rng() % s.size();
      switch (rng() % 3) {
        case 0: s[at] = static_cast<char>(rng()); break;
        case 1: s.erase(at, rng() % 16); break;
        default: s.insert(at, 1, "<>&;/\"'"[rng() % 7]); break;
      }
      if (s.empty()) s = "x";
    }
    try {
      parse_list_objects_v2(s);
    } catch (const Error&) {
    }
    (void)parse_error_body(s);
  }
}

TEST(S3Xml, ParsesErrorBodies) {
  auto e = parse_error_body(
      "<?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist"
      "</Message><BucketName>x</BucketName><Region>eu-west-1</Region></Error>");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "NoSuchBucket");
  EXPECT_EQ(e->message, "The specified bucket does not exist");
  EXPECT_EQ(e->region, "eu-west-1");
  EXPECT_FALSE(parse_error_body("<ListBucketResult/>"));
  EXPECT_FALSE(parse_error_body("not xml"));
}

TEST(S3Xml, TimestampsAndEtags) {
  EXPECT_EQ(parse_iso8601_ns("1970-01-01T00:00:01Z"), 1'000'000'000);
  EXPECT_EQ(parse_iso8601_ns("1970-01-01T00:00:01.5Z"), 1'500'000'000);
  EXPECT_THROW(parse_iso8601_ns("1970-01-01T00:00:01+02:00"), Error);
  EXPECT_THROW(parse_iso8601_ns("yesterday"), Error);
  // Past 2262 the nanoseconds overflow int64 (UBSan in fuzz_s3_listing): refused, not wrapped.
  EXPECT_EQ(parse_iso8601_ns("2262-01-01T00:00:00Z"), 9'214'646'400ll * 1'000'000'000);
  EXPECT_THROW(parse_iso8601_ns("2263-01-01T00:00:00Z"), Error);
  EXPECT_THROW(parse_iso8601_ns("9999-12-31T23:59:59.999Z"), Error);
  EXPECT_EQ(normalize_etag("\"abc\""), "abc");
  EXPECT_EQ(normalize_etag("W/\"abc\""), "abc");
  EXPECT_EQ(normalize_etag("abc"), "abc");
}

TEST(S3Version, MtimeKeepsSecondsAndFoldsTheEtag) {
  int64_t lm = 1704164645ll * 1'000'000'000 + 678'000'000;
  int64_t a = s3_version_mtime(lm, "etag-a"), b = s3_version_mtime(lm, "etag-b");
  EXPECT_EQ(a / 1'000'000'000, 1704164645);
  EXPECT_EQ(b / 1'000'000'000, 1704164645);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, s3_version_mtime(1704164645ll * 1'000'000'000, "etag-a"));  // listing ms vs HEAD seconds
}

// A read compares the reply's ETag with all 64 bits of the listed one's hash (the version's
// identity, which the cache key includes too), not the 30 bits folded into mtime_ns.
TEST(S3Version, IdentityIsTheWholeEtagHashAndTheListingKeepsIt) {
  EXPECT_NE(s3_version_identity("etag-a"), s3_version_identity("etag-b"));
  EXPECT_NE(s3_version_identity("etag-a"), 0u);
  KeyTree t;
  t.add("d/a.bin", 10, 5'000'000'000, s3_version_identity("etag-a"));
  const std::vector<TreeEntry> entries = t.finish();
  ASSERT_EQ(entries.size(), 3u);  // "", "d", "d/a.bin"
  EXPECT_EQ(entries[2].path, "d/a.bin");
  EXPECT_EQ(entries[2].st.identity, s3_version_identity("etag-a"));
  EXPECT_EQ(entries[1].st.identity, 0u) << "a directory has no ETag";
}

namespace {
std::vector<std::string> paths(KeyTree& t) {
  std::vector<std::string> out;
  for (auto& e : t.finish()) out.push_back(e.path + (S_ISDIR(e.st.mode) ? "/" : ""));
  return out;
}
}  // namespace

TEST(S3Keys, BuildsATreeWithDirectoriesBeforeChildren) {
  KeyTree t;
  t.add("train/cat/1.jpg", 10, 5);
  t.add("train/dog/2.jpg", 20, 7);
  t.add("deep/only/prefixes/x.bin", 1, 1);  // a prefix holding only sub-prefixes
  t.add("empty/", 0, 3);                    // a directory marker
  t.add("readme", 3, 1);
  std::vector<std::string> want = {
      "/",      "deep/",      "deep/only/",      "deep/only/prefixes/", "deep/only/prefixes/x.bin", "empty/", "readme",
      "train/", "train/cat/", "train/cat/1.jpg", "train/dog/",          "train/dog/2.jpg"};
  EXPECT_EQ(paths(t), want);
}

TEST(S3Keys, SkipsUnsafeKeysAndPrefersDirectories) {
  KeyTree t;
  t.add("/abs", 1, 1);
  t.add("a//b", 1, 1);
  t.add("../escape", 1, 1);
  t.add("a/./b", 1, 1);
  t.add("a/..", 1, 1);
  t.add(std::string(256, 'x'), 1, 1);
  t.add(std::string("nul\0x", 5), 1, 1);
  t.add("both", 1, 1);
  t.add("both/child", 2, 9);
  t.add("ok/" + std::string(255, 'y'), 1, 1);
  t.add("", 0, 0);  // the prefix's own marker
  t.add("/", 0, 0);
  auto got = paths(t);
  std::vector<std::string> want = {"/", "both/", "both/child", "ok/", "ok/" + std::string(255, 'y')};
  EXPECT_EQ(got, want);
  EXPECT_EQ(t.skipped(SkipReason::empty_segment), 3u);
  EXPECT_EQ(t.skipped(SkipReason::dot_segment), 3u);
  EXPECT_EQ(t.skipped(SkipReason::long_name), 1u);
  EXPECT_EQ(t.skipped(SkipReason::nul_byte), 1u);
  EXPECT_EQ(t.skipped(SkipReason::shadowed_by_prefix), 1u);
}

TEST(S3Keys, DirectoryMtimeIsTheNewestBeneath) {
  KeyTree t;
  t.add("a/b/x", 1, 100);
  t.add("a/y", 1, 50);
  auto entries = t.finish();
  ASSERT_EQ(entries.size(), 5u);
  EXPECT_EQ(entries[0].st.mtime_ns, 100);  // root
  EXPECT_EQ(entries[1].path, "a");
  EXPECT_EQ(entries[1].st.mtime_ns, 100);
}

TEST(S3Url, ParsesBucketAndPrefix) {
  EXPECT_EQ(parse_s3_url("s3://b").bucket, "b");
  EXPECT_EQ(parse_s3_url("s3://b").prefix, "");
  EXPECT_EQ(parse_s3_url("s3://b/").prefix, "");
  EXPECT_EQ(parse_s3_url("s3://b/x/y").prefix, "x/y/");
  EXPECT_EQ(parse_s3_url("s3://b//x//y/").prefix, "x/y/");
  EXPECT_THROW(parse_s3_url("s3:///x"), Error);
  EXPECT_THROW(parse_s3_url("s3://b/../x"), Error);
  EXPECT_THROW(parse_s3_url("s3://b?x/y"), Error);
  EXPECT_FALSE(is_s3_url("/data"));
}

TEST(S3Credentials, ReadsTheProfileSection) {
  const char* file =
      "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = s1\n\n"
      "[profile other]\n# comment\nAWS_ACCESS_KEY_ID=AKIDOTHER\naws_secret_access_key=s2\naws_session_token = tok\n";
  AwsCredentials d = parse_credentials_file(file, "default");
  EXPECT_EQ(d.access_key, "AKIDDEFAULT");
  EXPECT_EQ(d.secret_key, "s1");
  EXPECT_EQ(d.session_token, "");
  AwsCredentials o = parse_credentials_file(file, "other");
  EXPECT_EQ(o.access_key, "AKIDOTHER");
  EXPECT_EQ(o.session_token, "tok");
  EXPECT_TRUE(parse_credentials_file(file, "missing").empty());
}

#include "prepfs/source/http_client.h"

TEST(Http, UriEncodingIsStrict) {
  EXPECT_EQ(http::uri_encode("a/b c+d%e~f_g.h-i", true), "a/b%20c%2Bd%25e~f_g.h-i");
  EXPECT_EQ(http::uri_encode("a/b=", false), "a%2Fb%3D");
  EXPECT_EQ(http::uri_encode("\xc3\xbc", true), "%C3%BC");
}

// What a 206 says it carries places its bytes, so only the exact form counts: a signed first
// byte wrapped around (bytes landed at other offsets), and "bytes */N" was taken to start where
// the request did.
TEST(Http, ContentRangeIsParsedStrictly) {
  http::ContentRange cr;
  ASSERT_TRUE(http::parse_content_range("bytes 100-199/1000", &cr));
  EXPECT_EQ(cr.first, 100u);
  EXPECT_EQ(cr.last, 199u);
  EXPECT_TRUE(cr.total_known);
  EXPECT_EQ(cr.total, 1000u);
  ASSERT_TRUE(http::parse_content_range("bytes 0-9/*", &cr));
  EXPECT_FALSE(cr.total_known);
  for (const char* bad : {"bytes -100-899/1000", "bytes */1000", "bytes 5-4/10", "bytes 0-9/5", "bytes +1-9/10",
                          "bytes 0-9/10x", "bytes 0-9", "items 0-9/10", "bytes 0-18446744073709551616/*", ""})
    EXPECT_FALSE(http::parse_content_range(bad, &cr)) << bad;
}

TEST(S3Keys, ASizePastInt64IsSkipped) {
  s3::KeyTree t;
  t.add("a.bin", 10, 1);
  t.add("huge.bin", uint64_t(INT64_MAX) + 1, 1);
  t.add("max.bin", uint64_t(INT64_MAX), 1);
  std::vector<s3::TreeEntry> e = t.finish();
  ASSERT_EQ(e.size(), 3u);  // the root, a.bin and max.bin
  EXPECT_EQ(e[1].path, "a.bin");
  EXPECT_EQ(e[2].path, "max.bin");
  EXPECT_EQ(t.skipped(s3::SkipReason::huge_size), 1u);
}

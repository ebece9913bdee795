// The S3 XML the source reads: ListObjectsV2 pages and error bodies. A small non-recursive
// parser of our own (elements, text, the five entities, character references, CDATA, comments);
// each entry point is a plain function of bytes, so it is easy to fuzz. Malformed input throws
// Error(EIO); nothing else escapes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace prepfs::s3 {

// Timestamps are nanoseconds in int64, which reach the year 2262 (one second of margin for the
// fraction, and for s3_version_mtime's rounding): a later one from a server is refused, not
// wrapped, whether from a listing or from a HEAD's Last-Modified.
inline constexpr int64_t kMaxTimestampSeconds = INT64_MAX / 1'000'000'000 - 1;

struct ObjectEntry {
  std::string key;
  uint64_t size = 0;
  int64_t last_modified_ns = 0;
  std::string etag;  // normalized: no quotes, no W/ prefix
};

struct ListPage {
  std::vector<ObjectEntry> objects;
  bool truncated = false;
  std::string next_token;  // NextContinuationToken
};

struct ErrorBody {
  std::string code;
  std::string message;
  std::string region;  // <Region> of a PermanentRedirect / AuthorizationHeaderMalformed, if any
};

// Calls on_end(path, text) at every element end; path holds the open element names (namespace
// prefixes stripped), innermost last; text is the element's own character data (entities
// decoded). Throws Error(EIO) on malformed XML or nesting deeper than 64.
using XmlEndFn = std::function<void(const std::vector<std::string_view>& path, const std::string& text)>;
void walk_xml(std::string_view xml, const XmlEndFn& on_end);

// A ListBucketResult (ListObjectsV2). Keys are URL-decoded when the page says
// <EncodingType>url</EncodingType>. An <Error> document or anything else throws Error(EIO).
ListPage parse_list_objects_v2(std::string_view xml);

// An <Error> document; nullopt for anything else (including malformed bytes).
std::optional<ErrorBody> parse_error_body(std::string_view xml) noexcept;

// "2009-10-12T17:50:30.000Z" -> nanoseconds since the epoch. Throws Error(EIO).
int64_t parse_iso8601_ns(std::string_view s);

// "\"abc\"", "W/\"abc\"" -> "abc".
std::string normalize_etag(std::string_view etag);

// The decoding of encoding-type=url listings: "%2F" -> "/", '+' -> ' ' (S3 encodes a space as
// '+' and a plus as "%2B", as botocore's decoder assumes). Throws Error(EIO) on a bad escape.
std::string url_decode(std::string_view s);

}  // namespace prepfs::s3

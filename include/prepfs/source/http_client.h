// A small HTTP client over libcurl's multi interface: one event-loop thread drives every transfer,
// any number of caller threads submit batches of requests and block until their batch is done.
// The multi handle owns the connection pool, so connections are kept alive and reused across
// requests and callers. Bodies of successful GETs are written straight into the caller's buffer
// (memory stays bounded by what callers asked for); error bodies are kept, capped, for messages.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace prepfs::http {

struct ClientConfig {
  unsigned max_connections = 64;  // per host and in total
  long connect_timeout_ms = 3000;
  long low_speed_time_s = 10;  // a transfer below 1 byte/s for this long fails (timeout)
  long total_timeout_ms = 0;   // a transfer still running after this long fails (timeout); 0: none
  // SigV4 signing by libcurl (CURLOPT_AWS_SIGV4), e.g. "aws:amz:us-east-1:s3"; empty: unsigned.
  std::string sigv4;
  std::string access_key, secret_key;  // never logged
  std::string user_agent = "prepfs";
};

struct Request {
  std::string url;
  bool head = false;
  std::vector<std::string> headers;  // "Name: value"
  // GET into a caller buffer: the bytes of the object at [want_off, want_off + cap) land at
  // buf[0..cap). A 206 reply is placed by its Content-Range, a 200 reply (a server that ignored
  // Range) is skipped forward to want_off and cut off once the buffer is full.
  char* buf = nullptr;
  size_t cap = 0;
  uint64_t want_off = 0;
  // Without buf: the body is kept in Response::body, up to this many bytes (more fails the request).
  size_t max_body = 64u << 20;
};

struct Response {
  int curl_code = 0;       // CURLcode; 0 = the HTTP exchange completed
  std::string curl_error;  // libcurl's message (never holds credentials)
  long status = 0;
  std::string body;        // without buf, or the (capped) body of an error status
  size_t received = 0;     // bytes placed into buf
  bool satisfied = false;  // a 200 reply was cut off once buf was full (not an error)
  // A 206 into buf whose Content-Range does not place its bytes over the range asked for (none,
  // unparsable, or starting past it): the transfer was stopped with nothing trusted.
  bool unusable_range = false;
  std::string etag, content_range, last_modified, bucket_region;
  int64_t content_length = -1;
};

class Client {
 public:
  explicit Client(const ClientConfig& cfg);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Runs every request concurrently; returns the responses in the same order once all are done.
  // Thread-safe. Never throws for transfer failures (they are in the responses).
  std::vector<Response> run(const std::vector<Request>& reqs);

  // True for libcurl failures worth retrying (connect, timeouts, resets, partial bodies).
  static bool transient(int curl_code);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "bytes FIRST-LAST/TOTAL" (TOTAL may be "*"), digits only, FIRST <= LAST: what a 206 says it
// carries. False for anything else ("bytes */N" belongs to a 416; a sign is never valid).
struct ContentRange {
  uint64_t first = 0, last = 0;
  uint64_t total = 0;
  bool total_known = false;  // false for "*"
};
bool parse_content_range(std::string_view value, ContentRange* out);

// Percent-encoding for URL paths (keep_slash) and query values: everything but A-Z a-z 0-9 - _ . ~
std::string uri_encode(std::string_view s, bool keep_slash);

}  // namespace prepfs::http

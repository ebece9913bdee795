// An S3 (or S3-protocol) bucket prefix as a source: s3://bucket/prefix.
//
// Listing: ListObjectsV2, flat (no delimiter), paginated with continuation tokens; keys are mapped
// to a tree by s3::KeyTree (unsafe keys skipped, see s3_keys.h). There is no cheap directory
// fingerprint, so dir_fingerprint() is nullopt and the index is rebuilt by listing at every mount.
//
// Versions: FileVersion is {size, mtime_ns, identity}. identity = XXH3-64 of the ETag; mtime_ns =
// LastModified in whole seconds, plus, in the nanosecond field, XXH3(ETag) mod 1e9 (so the
// displayed mtime is right to the second and still moves with a same-size rewrite within the
// second). The cache key (built from all three) changes when the ETag does. A read checks the
// reply's ETag (all 64 bits of its hash) and total size against the expected version and answers
// EIO on a mismatch, so bytes of another version are never returned.
//
// Reads: one ranged GET per read (the core reads 1 MiB chunks); a read larger than part_size is
// split into parts fetched in parallel. Transfers run on libcurl's multi interface (one loop
// thread, pooled keep-alive connections); bodies land directly in the caller's buffer.
//
// Errors: 404 -> ENOENT, 403 -> EACCES; throttling (429, 503 SlowDown), other 5xx and transport
// failures are retried with exponential backoff and full jitter until retry_seconds have passed,
// then EIO. Every attempt has a total deadline (request_timeout), so a server trickling bytes
// cannot hold a reader forever: a read waits at most about retry_seconds + request_timeout.
// A listing whose continuation tokens cycle fails (EIO) instead of listing forever.
// Credentials never appear in logs or messages.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "prepfs/source/source.h"

namespace prepfs {

namespace http {
class Client;
struct Request;
struct Response;
}  // namespace http

struct S3Config {
  std::string endpoint;             // empty: https://s3.<region>.amazonaws.com
  std::string region;               // empty: $AWS_REGION, $AWS_DEFAULT_REGION, else us-east-1
  std::string path_style = "auto";  // "1", "0", "auto" (path style for a custom endpoint)
  std::string profile;              // empty: $AWS_PROFILE, else "default"
  unsigned connections = 64;
  double retry_seconds = 20;    // total time a request is retried before EIO
  double request_timeout = 60;  // total time one attempt may take (a trickling server): then retried
  uint64_t part_size = 8ull << 20;
};

struct S3Url {
  std::string bucket;
  std::string prefix;  // "" or ending in '/'
};
// "s3://bucket/some/prefix" -> {bucket, "some/prefix/"}. Throws Error(EINVAL).
S3Url parse_s3_url(const std::string& url);
bool is_s3_url(const std::string& source);

struct AwsCredentials {
  std::string access_key, secret_key, session_token;
  std::string origin;  // "environment", "~/.aws/credentials [profile]", "none" (for the log)
  bool empty() const { return access_key.empty(); }
};
// The environment first, then the shared credentials file ($AWS_SHARED_CREDENTIALS_FILE or
// ~/.aws/credentials) for the profile. Empty (anonymous) when neither has keys.
AwsCredentials load_aws_credentials(const std::string& profile);
// The [profile] section of a credentials file's text.
AwsCredentials parse_credentials_file(const std::string& text, const std::string& profile);

// mtime_ns and identity as described above (etag normalized: s3::normalize_etag).
int64_t s3_version_mtime(int64_t last_modified_ns, const std::string& etag);
uint64_t s3_version_identity(const std::string& etag);

class S3Source final : public Source {
 public:
  // Checks the endpoint, bucket and credentials with one small listing; throws Error with one
  // clear line (ENOENT no such bucket, EACCES denied, EIO "cannot reach ENDPOINT" once the retries
  // for an unreachable endpoint are spent: readers see EIO, the one errno of a source outage).
  S3Source(const std::string& url, const S3Config& cfg);
  ~S3Source() override;

  std::string identity() const override;
  void scan(const Visitor& visit) override;
  SourceStat stat(const std::string& rel) override;
  std::optional<DirFingerprint> dir_fingerprint(const std::string& rel) override;
  size_t read(const std::string& rel, const FileVersion& expect, uint64_t off, void* buf, size_t len) override;

 private:
  enum class Outcome { ok, retry, fail };
  struct Verdict {
    Outcome outcome;
    int err = 0;
    std::string why;
  };
  Verdict classify(const http::Response& r, const std::string& what) const;
  // Runs reqs, retrying the failed ones, until all succeed or the budget is spent; throws Error.
  // quiet: no "retrying" warning (the mount-time probe reports one line, at the end).
  std::vector<http::Response> execute(const std::vector<http::Request>& reqs, const std::string& what,
                                      double budget_seconds, bool quiet = false);
  std::string object_url(const std::string& rel) const;
  std::string list_url(const std::string& prefix, const std::string& token, unsigned max_keys) const;
  std::vector<std::string> common_headers() const;
  std::string redact(std::string s) const;
  void note_outage(const std::string& why);

  S3Url url_;
  S3Config cfg_;
  std::string source_;    // as given, for messages
  std::string endpoint_;  // scheme://host[:port], no trailing slash
  std::string base_;      // where keys go: endpoint/bucket or scheme://bucket.host
  bool path_style_ = true;
  AwsCredentials creds_;
  std::unique_ptr<http::Client> client_;
  std::atomic<int64_t> last_outage_log_ms_{0};
};

}  // namespace prepfs

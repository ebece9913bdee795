#include "prepfs/source/s3_source.h"

#include <curl/curl.h>
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <unordered_set>

#include "prepfs/common/error.h"
#include "prepfs/common/fs_util.h"
#include "prepfs/source/http_client.h"
#include "prepfs/source/s3_keys.h"
#include "prepfs/source/s3_xml.h"

namespace prepfs {
namespace {

using Clock = std::chrono::steady_clock;

// SHA-256 of the empty payload: every request we send is a GET or HEAD without a body.
// Bounds on a listing (see scan): real tokens are a few hundred bytes, and real servers send an
// empty page that says more follow rarely (a gateway over many delete markers), never a thousand
// in a row.
constexpr size_t kMaxTokenBytes = 4096;
constexpr uint64_t kMaxEmptyPages = 1000;
constexpr size_t kKeysPerPage = 1000;  // ListObjectsV2's max-keys, and its default

constexpr const char* kEmptyPayloadSha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string trim(std::string s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
}

SourceStat dir_stat() { return SourceStat{s3::kS3DirMode, 0, 0, {}}; }

}  // namespace

bool is_s3_url(const std::string& source) { return source.rfind("s3://", 0) == 0; }

S3Url parse_s3_url(const std::string& url) {
  if (!is_s3_url(url)) throw Error(EINVAL, "source " + url + " is not an s3:// URL");
  std::string rest = url.substr(5);
  size_t slash = rest.find('/');
  S3Url out;
  out.bucket = rest.substr(0, slash);
  if (out.bucket.empty()) throw Error(EINVAL, "source " + url + ": no bucket name (expected s3://bucket/prefix)");
  for (char c : out.bucket) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
    if (!ok) throw Error(EINVAL, "source " + url + ": invalid bucket name '" + out.bucket + "'");
  }
  if (slash == std::string::npos) return out;
  std::string prefix = rest.substr(slash + 1);
  std::stringstream ss(prefix);
  std::string seg;
  while (std::getline(ss, seg, '/')) {
    if (seg.empty()) continue;
    if (seg == "." || seg == "..")
      throw Error(EINVAL, "source " + url + ": '.' and '..' are not allowed in the prefix");
    out.prefix += seg + "/";
  }
  return out;
}

AwsCredentials parse_credentials_file(const std::string& text, const std::string& profile) {
  AwsCredentials c;
  std::stringstream ss(text);
  std::string line, section;
  while (std::getline(ss, line)) {
    size_t hash = line.find_first_of("#;");
    if (hash != std::string::npos && (hash == 0 || line[hash - 1] == ' ' || line[hash - 1] == '\t')) line.erase(hash);
    line = trim(line);
    if (line.empty()) continue;
    if (line.front() == '[' && line.back() == ']') {
      section = trim(line.substr(1, line.size() - 2));
      if (section.rfind("profile ", 0) == 0) section = trim(section.substr(8));
      continue;
    }
    if (section != profile) continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    std::transform(key.begin(), key.end(), key.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (key == "aws_access_key_id")
      c.access_key = value;
    else if (key == "aws_secret_access_key")
      c.secret_key = value;
    else if (key == "aws_session_token" || key == "aws_security_token")
      c.session_token = value;
  }
  return c;
}

AwsCredentials load_aws_credentials(const std::string& profile_opt) {
  AwsCredentials c;
  c.access_key = env("AWS_ACCESS_KEY_ID");
  c.secret_key = env("AWS_SECRET_ACCESS_KEY");
  if (!c.access_key.empty() && !c.secret_key.empty()) {
    c.session_token = env("AWS_SESSION_TOKEN");
    c.origin = "the environment";
    return c;
  }
  std::string profile = !profile_opt.empty()          ? profile_opt
                        : !env("AWS_PROFILE").empty() ? env("AWS_PROFILE")
                                                      : "default";
  std::string path = env("AWS_SHARED_CREDENTIALS_FILE");
  // Under systemd a service has no HOME: the password entry's home still finds the file.
  if (path.empty() && !home_directory().empty()) path = home_directory() + "/.aws/credentials";
  if (!path.empty()) {
    std::ifstream in(path);
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      AwsCredentials f = parse_credentials_file(text.str(), profile);
      if (!f.access_key.empty() && !f.secret_key.empty()) {
        f.origin = path + " [" + profile + "]";
        return f;
      }
    }
  }
  if (!profile_opt.empty())
    throw Error(EINVAL, "option s3_profile=" + profile_opt + ": no such profile with keys in " +
                            (path.empty() ? std::string("~/.aws/credentials") : path));
  return AwsCredentials{{}, {}, {}, "none"};
}

uint64_t s3_version_identity(const std::string& etag) { return XXH3_64bits(etag.data(), etag.size()); }

int64_t s3_version_mtime(int64_t last_modified_ns, const std::string& etag) {
  int64_t secs = last_modified_ns / 1'000'000'000;
  if (last_modified_ns < 0 && last_modified_ns % 1'000'000'000 != 0) secs--;
  uint64_t h = XXH3_64bits(etag.data(), etag.size());
  return secs * 1'000'000'000 + static_cast<int64_t>(h % 1'000'000'000);
}

S3Source::S3Source(const std::string& url, const S3Config& cfg) : url_(parse_s3_url(url)), cfg_(cfg), source_(url) {
  if (cfg_.region.empty()) cfg_.region = env("AWS_REGION");
  if (cfg_.region.empty()) cfg_.region = env("AWS_DEFAULT_REGION");
  if (cfg_.region.empty()) cfg_.region = "us-east-1";
  bool custom = !cfg_.endpoint.empty();
  endpoint_ = custom ? cfg_.endpoint : "https://s3." + cfg_.region + ".amazonaws.com";
  if (endpoint_.find("://") == std::string::npos) endpoint_ = "https://" + endpoint_;
  while (endpoint_.size() > 1 && endpoint_.back() == '/') endpoint_.pop_back();
  if (endpoint_.rfind("http://", 0) != 0 && endpoint_.rfind("https://", 0) != 0)
    throw Error(EINVAL, "option s3_endpoint=" + cfg_.endpoint + ": expected http://host[:port] or https://host[:port]");
  if (cfg_.path_style == "1")
    path_style_ = true;
  else if (cfg_.path_style == "0")
    path_style_ = false;
  else
    path_style_ = custom || url_.bucket.find('.') != std::string::npos;
  if (path_style_) {
    base_ = endpoint_ + "/" + url_.bucket;
  } else {
    size_t host_at = endpoint_.find("://") + 3;
    base_ = endpoint_.substr(0, host_at) + url_.bucket + "." + endpoint_.substr(host_at);
  }

  creds_ = load_aws_credentials(cfg_.profile);
  http::ClientConfig hc;
  hc.max_connections = cfg_.connections;
  hc.total_timeout_ms = static_cast<long>(cfg_.request_timeout * 1000);
  if (!creds_.empty()) {
    hc.sigv4 = "aws:amz:" + cfg_.region + ":s3";
    hc.access_key = creds_.access_key;
    hc.secret_key = creds_.secret_key;
  }
  client_ = std::make_unique<http::Client>(hc);

  // One small listing proves the endpoint, the bucket and the credentials before anything mounts.
  http::Request probe;
  probe.url = list_url(url_.prefix, "", 1);
  probe.headers = common_headers();
  execute({probe}, "source " + source_, std::min(cfg_.retry_seconds, 5.0), true);
  if (!creds_.empty())
    spdlog::info("s3: {} via {} ({} addressing), requests signed (SigV4, region {}) with credentials from {}", source_,
                 endpoint_, path_style_ ? "path-style" : "virtual-hosted", cfg_.region, creds_.origin);
  else
    spdlog::info("s3: {} via {}: no AWS credentials in the environment or the credentials file, requests are unsigned",
                 source_, endpoint_);
}

S3Source::~S3Source() = default;

std::string S3Source::identity() const { return "s3:" + endpoint_ + "/" + url_.bucket + "/" + url_.prefix; }

std::vector<std::string> S3Source::common_headers() const {
  std::vector<std::string> h;
  if (!creds_.empty()) {
    h.push_back(std::string("x-amz-content-sha256: ") + kEmptyPayloadSha256);
    if (!creds_.session_token.empty()) h.push_back("x-amz-security-token: " + creds_.session_token);
  }
  return h;
}

std::string S3Source::object_url(const std::string& rel) const {
  return base_ + "/" + http::uri_encode(url_.prefix + rel, true);
}

std::string S3Source::list_url(const std::string& prefix, const std::string& token, unsigned max_keys) const {
  // Parameters in canonical (sorted, strictly encoded) order, so the signed query is the sent one.
  std::string q;
  if (!token.empty()) q += "continuation-token=" + http::uri_encode(token, false) + "&";
  q += "encoding-type=url&list-type=2&max-keys=" + std::to_string(max_keys);
  if (!prefix.empty()) q += "&prefix=" + http::uri_encode(prefix, false);
  return base_ + (path_style_ ? "?" : "/?") + q;
}

std::string S3Source::redact(std::string s) const {
  for (const std::string* secret : {&creds_.access_key, &creds_.secret_key, &creds_.session_token}) {
    if (secret->size() < 4) continue;
    for (size_t at; (at = s.find(*secret)) != std::string::npos;) s.replace(at, secret->size(), "***");
  }
  return s;
}

void S3Source::note_outage(const std::string& why) {
  int64_t now = now_ms(), last = last_outage_log_ms_.load(std::memory_order_relaxed);
  if (now - last < 10'000 || !last_outage_log_ms_.compare_exchange_strong(last, now)) return;
  spdlog::warn("s3: {}; retrying (for up to {:.0f}s per request)", why, cfg_.retry_seconds);
}

S3Source::Verdict S3Source::classify(const http::Response& r, const std::string& what) const {
  if (r.unusable_range)
    return {Outcome::fail, EIO,
            "the server answered 206 with Content-Range '" + r.content_range.substr(0, 64) +
                "', which does not place its bytes over the range asked for; nothing of it is used"};
  if (r.curl_code != CURLE_OK) {
    if (r.satisfied && r.curl_code == CURLE_WRITE_ERROR) return {Outcome::ok, 0, {}};
    std::string why = "cannot reach " + endpoint_ + ": " + r.curl_error;
    if (http::Client::transient(r.curl_code)) return {Outcome::retry, EIO, why};
    return {Outcome::fail, EIO, why};
  }
  long s = r.status;
  if (s >= 200 && s < 300) return {Outcome::ok, 0, {}};
  std::optional<s3::ErrorBody> body = s3::parse_error_body(r.body);
  std::string code = body ? body->code : std::string();
  std::string detail = "HTTP " + std::to_string(s) + (code.empty() ? "" : " " + code) +
                       (body && !body->message.empty() ? ": " + body->message : "");
  if (s == 429 || s == 500 || s == 502 || s == 503 || s == 504 || code == "SlowDown" || code == "RequestTimeout" ||
      code == "InternalError")
    return {Outcome::retry, EIO, detail};
  if (s == 404) {
    if (code == "NoSuchBucket")
      return {Outcome::fail, ENOENT, "bucket '" + url_.bucket + "' does not exist at " + endpoint_};
    return {Outcome::fail, ENOENT, "not found (" + detail + ")"};
  }
  if (s == 401 || s == 403)
    return {Outcome::fail, EACCES,
            "access denied (" + detail + "); check the credentials (from " +
                (creds_.empty() ? std::string("nowhere: unsigned requests") : creds_.origin) +
                "), s3_region and the bucket policy"};
  if (s == 412 || s == 416) return {Outcome::fail, EIO, "the object changed since it was listed (" + detail + ")"};
  if (s == 301 || s == 307 || code == "AuthorizationHeaderMalformed" || code == "PermanentRedirect") {
    std::string region = !r.bucket_region.empty() ? r.bucket_region : body ? body->region : "";
    return {Outcome::fail, EIO,
            "bucket '" + url_.bucket + "' is not served here (" + detail + ")" +
                (region.empty() ? "" : "; it is in region " + region + ": set s3_region=" + region)};
  }
  (void)what;
  return {Outcome::fail, EIO, detail};
}

std::vector<http::Response> S3Source::execute(const std::vector<http::Request>& reqs, const std::string& what,
                                              double budget_seconds, bool quiet) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  auto t0 = Clock::now();
  std::vector<http::Response> out(reqs.size());
  std::vector<size_t> todo(reqs.size());
  for (size_t i = 0; i < todo.size(); i++) todo[i] = i;
  for (int attempt = 1;; attempt++) {
    std::vector<http::Request> batch;
    batch.reserve(todo.size());
    for (size_t i : todo) batch.push_back(reqs[i]);
    std::vector<http::Response> got = client_->run(batch);
    std::vector<size_t> again;
    std::string why;
    for (size_t k = 0; k < todo.size(); k++) {
      Verdict v = classify(got[k], what);
      if (v.outcome == Outcome::fail) throw Error(v.err, redact(what + ": " + v.why));
      if (v.outcome == Outcome::retry) {
        again.push_back(todo[k]);
        why = v.why;
      }
      out[todo[k]] = std::move(got[k]);
    }
    if (again.empty()) return out;
    // Exponential backoff with jitter: 100 ms doubling to 3.2 s, each sleep drawn from [cap/2, cap].
    double cap = 0.1 * double(1u << std::min(attempt - 1, 5));
    double sleep = std::uniform_real_distribution<double>(cap / 2, cap)(rng);
    double spent = seconds_since(t0);
    if (spent + sleep > budget_seconds)
      throw Error(EIO, redact(what + ": " + why + " (gave up after " + std::to_string(attempt) + " attempts in " +
                              std::to_string(static_cast<int>(spent + 0.5)) + "s)"));
    if (!quiet) note_outage(what + ": " + why);
    std::this_thread::sleep_for(std::chrono::duration<double>(sleep));
    todo = std::move(again);
  }
}

void S3Source::scan(const Visitor& visit) {
  auto t0 = Clock::now();
  s3::KeyTree tree;
  std::string token;
  uint64_t objects = 0, pages = 0, foreign = 0, empty_run = 0;
  std::unordered_set<uint64_t> seen_tokens;
  std::string last_key;     // ListObjectsV2 lists keys in ascending order, page after page
  std::string highest_key;  // the highest listed so far
  bool have_last = false;
  const std::string what = "listing " + source_;
  do {
    http::Request req;
    req.url = list_url(url_.prefix, token, kKeysPerPage);
    req.headers = common_headers();
    std::vector<http::Response> r = execute({req}, what, cfg_.retry_seconds);
    s3::ListPage page;
    try {
      page = s3::parse_list_objects_v2(r[0].body);
    } catch (const Error& e) {
      throw Error(EIO, what + ": " + e.what());
    }
    pages++;
    // A server that never ends a listing must not hold the mount, or its memory, forever: keys
    // must go on rising, a token must be of a sane length, and a run of empty pages ends.
    auto refuse = [&](const std::string& why) {
      throw Error(EIO, what + ": " + why + " after " + std::to_string(pages) + " pages; the listing is incomplete");
    };
    // Each page must go on from the last (its first key above the last page's last), and reach
    // past every key listed before it: a server that sends one page again and again with a fresh
    // token (keys z, 0; then z, 0 ...) passed the first-key check alone. Within a page the order
    // is not checked: s3rver lists a/b/x before a/b.
    if (!page.objects.empty()) {
      const std::string& first = page.objects.front().key;
      const std::string& top =
          std::max_element(page.objects.begin(), page.objects.end(), [](const auto& a, const auto& b) {
            return a.key < b.key;
          })->key;
      if (have_last && first <= last_key)
        refuse("the server listed key '" + first.substr(0, 64) + "' again or out of order");
      if (have_last && top <= highest_key)
        refuse("the server sent a page of keys listed before (up to '" + top.substr(0, 64) + "')");
      last_key = page.objects.back().key;
      if (!have_last || top > highest_key) highest_key = top;
      have_last = true;
    }
    // We ask for 1000 keys a page; a page of more (up to the 64 MiB body cap, a million keys)
    // that says more follow is not what was asked for. A last page of more (a gateway that
    // ignores max-keys and sends the whole bucket at once) ends the listing: it is served.
    if (page.truncated && page.objects.size() > kKeysPerPage)
      refuse("the server sent " + std::to_string(page.objects.size()) + " keys in one page (asked for at most " +
             std::to_string(kKeysPerPage) + ")");
    empty_run = page.objects.empty() ? empty_run + 1 : 0;
    if (page.truncated && empty_run >= kMaxEmptyPages)
      refuse("the server sent " + std::to_string(empty_run) + " empty pages in a row, each saying more follow");
    if (page.truncated && page.next_token.size() > kMaxTokenBytes)
      refuse("the server sent a continuation token of " + std::to_string(page.next_token.size()) + " bytes");
    for (const s3::ObjectEntry& o : page.objects) {
      if (o.key.compare(0, url_.prefix.size(), url_.prefix) != 0) {
        if (foreign++ == 0) spdlog::warn("s3: the listing returned key '{}' outside the prefix; ignored", o.key);
        continue;
      }
      objects++;
      tree.add(std::string_view(o.key).substr(url_.prefix.size()), o.size,
               s3_version_mtime(o.last_modified_ns, o.etag), s3_version_identity(o.etag));
    }
    // A server that hands out a token twice (A -> B -> A) would be listed forever. Their hashes
    // are kept, not the tokens (up to 4 KiB each).
    if (page.truncated && !seen_tokens.insert(XXH3_64bits(page.next_token.data(), page.next_token.size())).second)
      throw Error(EIO, what + ": the server repeated continuation token '" + page.next_token.substr(0, 64) +
                           "' after " + std::to_string(pages) + " pages (a cycle); the listing is incomplete");
    token = page.truncated ? page.next_token : "";
  } while (!token.empty());
  std::vector<s3::TreeEntry> entries = tree.finish();
  uint64_t skipped = 0;
  for (int r = 0; r < static_cast<int>(s3::SkipReason::kCount); r++) {
    uint64_t n = tree.skipped(static_cast<s3::SkipReason>(r));
    if (n) spdlog::warn("s3: skipped {} key(s) with {}", n, s3::skip_reason_text(static_cast<s3::SkipReason>(r)));
    skipped += n;
  }
  spdlog::info("s3: listed {} objects of {} in {} page(s) in {:.3f}s ({} skipped, {} directory markers)", objects,
               source_, pages, seconds_since(t0), skipped, tree.dir_markers());
  if (objects == 0) spdlog::warn("s3: {} holds no objects: the mount is empty", source_);
  for (const s3::TreeEntry& e : entries) visit(e.path, e.st);
}

SourceStat S3Source::stat(const std::string& rel) {
  if (rel.empty()) return dir_stat();
  http::Request head;
  head.url = object_url(rel);
  head.head = true;
  head.headers = common_headers();
  try {
    std::vector<http::Response> r = execute({head}, "HEAD " + source_ + "/" + rel, cfg_.retry_seconds);
    // The version is made of these three. A reply without one of them (a proxy that strips
    // headers) tells no version: defaults (size 0, time 0) would pass for a change, and the file
    // would be served empty. EIO: a revalidation then keeps the version it has.
    time_t lm = r[0].last_modified.empty() ? -1 : curl_getdate(r[0].last_modified.c_str(), nullptr);
    if (lm > s3::kMaxTimestampSeconds) lm = -1;  // past 2262 its nanoseconds would wrap
    if (r[0].content_length < 0 || lm < 0 || r[0].etag.empty())
      throw Error(EIO, "HEAD " + source_ + "/" + rel + " answered without " +
                           (r[0].content_length < 0 ? "Content-Length" : lm < 0 ? "a valid Last-Modified" : "ETag") +
                           ": its version is unknown");
    const std::string etag = s3::normalize_etag(r[0].etag);
    return SourceStat{s3::kS3FileMode, static_cast<uint64_t>(std::max<int64_t>(r[0].content_length, 0)),
                      s3_version_mtime(int64_t(lm) * 1'000'000'000, etag), {}, s3_version_identity(etag)};
  } catch (const Error& e) {
    if (e.err() != ENOENT) throw;
  }
  http::Request list;
  list.url = list_url(url_.prefix + rel + "/", "", 1);
  list.headers = common_headers();
  std::vector<http::Response> r = execute({list}, "listing " + source_ + "/" + rel, cfg_.retry_seconds);
  // A key under it, not just any key: a gateway that ignores prefix= lists the whole bucket,
  // and every missing name would pass for an empty directory.
  const std::string under = url_.prefix + rel + "/";
  for (const s3::ObjectEntry& o : s3::parse_list_objects_v2(r[0].body).objects)
    if (o.key.compare(0, under.size(), under) == 0) return dir_stat();
  throw Error(ENOENT, "s3 object " + rel + " is gone");
}

std::optional<DirFingerprint> S3Source::dir_fingerprint(const std::string&) { return std::nullopt; }

size_t S3Source::read(const std::string& rel, const FileVersion& expect, uint64_t off, void* buf, size_t len) {
  if (off >= expect.size || len == 0) return 0;
  auto t0 = Clock::now();
  SourceBusy busy(counters_);
  size_t want = static_cast<size_t>(std::min<uint64_t>(len, expect.size - off));
  const uint64_t part = std::max<uint64_t>(cfg_.part_size, 64 << 10);
  std::vector<http::Request> reqs;
  std::string url = object_url(rel);
  std::vector<std::string> headers = common_headers();
  for (uint64_t p = 0; p < want; p += part) {
    http::Request q;
    q.url = url;
    q.headers = headers;
    q.cap = static_cast<size_t>(std::min<uint64_t>(part, want - p));
    q.want_off = off + p;
    q.buf = static_cast<char*>(buf) + p;
    q.headers.push_back("Range: bytes=" + std::to_string(q.want_off) + "-" + std::to_string(q.want_off + q.cap - 1));
    reqs.push_back(std::move(q));
  }
  try {
    std::vector<http::Response> resps = execute(reqs, "GET " + source_ + "/" + rel, cfg_.retry_seconds);
    for (size_t i = 0; i < resps.size(); i++) {
      const http::Response& r = resps[i];
      uint64_t total = 0;
      if (r.status == 206) {
        http::ContentRange cr;  // checked when its body began (http_client.cc); 0 if it says "*"
        if (http::parse_content_range(r.content_range, &cr) && cr.total_known) total = cr.total;
      } else {
        total = r.content_length >= 0 ? static_cast<uint64_t>(r.content_length) : 0;
      }
      // Without an ETag the bytes could be any version of the same size: a proxy that strips it
      // must not turn an overwritten object into the old one's cache entries.
      if (r.etag.empty())
        throw Error(EIO, "GET " + source_ + "/" + rel + " answered without an ETag: its version is unknown");
      // All 64 bits of the ETag's hash: the 30 folded into mtime_ns would let a same-size
      // rewrite whose ETag was ground to match pass for the listed version.
      const bool etag_ok = s3_version_identity(s3::normalize_etag(r.etag)) == expect.identity;
      if (total != expect.size || !etag_ok) {
        bump(counters_.changed);
        spdlog::warn(
            "s3 object {} changed since it was listed (size {} -> {}{}); refusing to serve mixed "
            "versions. Remount (or set metadata_ttl) to pick up changes.",
            rel, expect.size, total, etag_ok ? "" : ", new ETag");
        throw Error(EIO, "s3 object " + rel + " changed");
      }
      if (r.received != reqs[i].cap) throw Error(EIO, "s3 object " + rel + " is shorter than listed");
    }
  } catch (const Error& e) {
    bump(counters_.errors);
    // A deleted object is a version change like any other: EIO from read(2), not ENOENT.
    if (e.err() == ENOENT) {
      bump(counters_.changed);
      throw Error(EIO, "s3 object " + rel + " is gone: " + e.what());
    }
    throw;
  } catch (...) {
    bump(counters_.errors);
    throw;
  }
  uint64_t ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  bump(counters_.reads);
  bump(counters_.bytes, want);
  bump(counters_.read_ns, ns);
  counters_.read_latency.record(ns);
  return want;
}

}  // namespace prepfs

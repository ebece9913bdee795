#include "prepfs/source/http_client.h"

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "prepfs/common/error.h"

namespace prepfs::http {
namespace {

struct Batch {
  std::mutex mu;
  std::condition_variable cv;
  size_t remaining = 0;
};

bool iequals_prefix(std::string_view line, std::string_view name) {
  if (line.size() < name.size()) return false;
  for (size_t i = 0; i < name.size(); i++)
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

constexpr size_t kMaxErrorBody = 64 << 10;
constexpr size_t kMaxIdleHandles = 256;

}  // namespace

struct Transfer {
  const Request* req = nullptr;
  Response* resp = nullptr;
  Batch* batch = nullptr;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  bool started_body = false;
  uint64_t pos = 0;  // object offset of the next body byte (buffer GETs)
  char errbuf[CURL_ERROR_SIZE] = {};
};

struct Client::Impl {
  ClientConfig cfg;
  CURLM* multi = nullptr;
  std::thread loop_thread;
  std::mutex mu;  // pending_, stop_, idle_
  std::vector<Transfer*> pending;
  std::vector<CURL*> idle;
  bool stop = false;
  std::unordered_set<Transfer*> active;  // loop thread only

  static size_t on_header(char* p, size_t size, size_t n, void* ud) {
    auto* t = static_cast<Transfer*>(ud);
    size_t len = size * n;
    std::string_view line(p, len);
    Response& r = *t->resp;
    if (line.starts_with("HTTP/")) {  // a new response (after a 100 Continue): forget the last one
      r.etag.clear();
      r.content_range.clear();
      r.last_modified.clear();
      r.bucket_region.clear();
      r.content_length = -1;
      return len;
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return len;
    std::string_view value = trim(line.substr(colon + 1));
    if (iequals_prefix(line, "etag:"))
      r.etag = value;
    else if (iequals_prefix(line, "content-range:"))
      r.content_range = value;
    else if (iequals_prefix(line, "last-modified:"))
      r.last_modified = value;
    else if (iequals_prefix(line, "x-amz-bucket-region:"))
      r.bucket_region = value.substr(0, 64);
    else if (iequals_prefix(line, "content-length:")) {
      try {
        r.content_length = std::stoll(std::string(value));
      } catch (...) {
        r.content_length = -1;
      }
    }
    return len;
  }

  static size_t on_body(char* p, size_t size, size_t n, void* ud) {
    auto* t = static_cast<Transfer*>(ud);
    size_t len = size * n;
    Response& r = *t->resp;
    const Request& q = *t->req;
    if (!t->started_body) {
      t->started_body = true;
      curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &r.status);
      t->pos = 0;
      if (r.status == 206 && q.buf) {
        // Placed by its own first byte, so it must say where that is, and cover what was asked:
        // a reply starting past want_off would leave a hole, and one with no start (or a
        // signed one that wraps) would put its bytes at offsets they are not.
        ContentRange cr;
        if (!parse_content_range(r.content_range, &cr) || cr.first > q.want_off) {
          r.unusable_range = true;
          return 0;  // stops the transfer
        }
        t->pos = cr.first;
      }
    }
    if (!q.buf || r.status < 200 || r.status >= 300) {
      if (q.buf || r.status < 200 || r.status >= 300) {  // an error body: keep the start of it
        size_t room = kMaxErrorBody - std::min(kMaxErrorBody, r.body.size());
        r.body.append(p, std::min(room, len));
        return len;
      }
      if (r.body.size() + len > q.max_body) return 0;  // refuse unbounded bodies
      r.body.append(p, len);
      return len;
    }
    uint64_t pos = t->pos, end = pos + len;
    t->pos = end;
    uint64_t lo = std::max(pos, q.want_off), hi = std::min(end, q.want_off + q.cap);
    if (lo < hi) {
      std::memcpy(q.buf + (lo - q.want_off), p + (lo - pos), hi - lo);
      r.received += hi - lo;
    }
    if (end > q.want_off + q.cap) {
      if (r.status == 200) r.satisfied = true;  // the rest of a whole-object reply is not needed
      return 0;                                 // stop the transfer
    }
    return len;
  }

  CURL* take_handle() {
    {
      std::lock_guard lock(mu);
      if (!idle.empty()) {
        CURL* e = idle.back();
        idle.pop_back();
        return e;
      }
    }
    CURL* e = curl_easy_init();
    if (!e) throw Error(ENOMEM, "curl_easy_init failed");
    return e;
  }

  void give_handle(CURL* e) {
    curl_easy_reset(e);
    std::lock_guard lock(mu);
    if (idle.size() < kMaxIdleHandles)
      idle.push_back(e);
    else
      curl_easy_cleanup(e);
  }

  void setup(Transfer& t) {
    const Request& q = *t.req;
    CURL* e = t.easy;
    curl_easy_setopt(e, CURLOPT_URL, q.url.c_str());
    curl_easy_setopt(e, CURLOPT_PRIVATE, &t);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t.errbuf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Impl::on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &Impl::on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, cfg.connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, cfg.low_speed_time_s);
    // The low-speed limit alone lets a server trickle 2 B/s forever: a total deadline too.
    if (cfg.total_timeout_ms > 0) curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, cfg.total_timeout_ms);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, cfg.user_agent.c_str());
    if (q.head) curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    for (const std::string& h : q.headers) t.headers = curl_slist_append(t.headers, h.c_str());
    if (t.headers) curl_easy_setopt(e, CURLOPT_HTTPHEADER, t.headers);
    if (!cfg.sigv4.empty()) {
      curl_easy_setopt(e, CURLOPT_AWS_SIGV4, cfg.sigv4.c_str());
      curl_easy_setopt(e, CURLOPT_USERNAME, cfg.access_key.c_str());
      curl_easy_setopt(e, CURLOPT_PASSWORD, cfg.secret_key.c_str());
    }
  }

  void finish(Transfer* t, CURLcode code) {
    Response& r = *t->resp;
    r.curl_code = code;
    long status = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    r.status = status;
    if (code != CURLE_OK) r.curl_error = t->errbuf[0] ? t->errbuf : curl_easy_strerror(code);
    curl_multi_remove_handle(multi, t->easy);
    curl_slist_free_all(t->headers);
    t->headers = nullptr;
    give_handle(t->easy);
    t->easy = nullptr;
    active.erase(t);
    Batch* b = t->batch;
    std::lock_guard lock(b->mu);
    if (--b->remaining == 0) b->cv.notify_all();
  }

  void loop() {
    std::vector<Transfer*> incoming;
    for (;;) {
      {
        std::lock_guard lock(mu);
        if (stop) break;
        incoming.swap(pending);
      }
      for (Transfer* t : incoming) {
        active.insert(t);
        if (curl_multi_add_handle(multi, t->easy) != CURLM_OK) finish(t, CURLE_FAILED_INIT);
      }
      incoming.clear();
      int running = 0;
      curl_multi_perform(multi, &running);
      int queued = 0;
      while (CURLMsg* m = curl_multi_info_read(multi, &queued)) {
        if (m->msg != CURLMSG_DONE) continue;
        Transfer* t = nullptr;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &t);
        CURLcode code = m->data.result;
        finish(t, code);  // m is invalid after this
      }
      curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
    }
    // Shutting down with transfers in flight: fail them so no caller waits forever.
    std::vector<Transfer*> left;
    {
      std::lock_guard lock(mu);
      left.swap(pending);
    }
    for (Transfer* t : left) {
      active.insert(t);
      curl_multi_add_handle(multi, t->easy);
    }
    std::vector<Transfer*> all(active.begin(), active.end());
    for (Transfer* t : all) finish(t, CURLE_ABORTED_BY_CALLBACK);
  }
};

Client::Client(const ClientConfig& cfg) : impl_(std::make_unique<Impl>()) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  impl_->cfg = cfg;
  impl_->multi = curl_multi_init();
  if (!impl_->multi) throw Error(ENOMEM, "curl_multi_init failed");
  long conns = static_cast<long>(std::max(1u, cfg.max_connections));
  curl_multi_setopt(impl_->multi, CURLMOPT_MAX_HOST_CONNECTIONS, conns);
  curl_multi_setopt(impl_->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, conns);
  curl_multi_setopt(impl_->multi, CURLMOPT_MAXCONNECTS, conns);
  impl_->loop_thread = std::thread([this] { impl_->loop(); });
}

Client::~Client() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stop = true;
  }
  curl_multi_wakeup(impl_->multi);
  impl_->loop_thread.join();
  for (CURL* e : impl_->idle) curl_easy_cleanup(e);
  curl_multi_cleanup(impl_->multi);
}

std::vector<Response> Client::run(const std::vector<Request>& reqs) {
  std::vector<Response> resps(reqs.size());
  if (reqs.empty()) return resps;
  Batch batch;
  std::vector<Transfer> ts(reqs.size());
  try {
    for (size_t i = 0; i < reqs.size(); i++) {
      ts[i].req = &reqs[i];
      ts[i].resp = &resps[i];
      ts[i].batch = &batch;
      ts[i].easy = impl_->take_handle();
      impl_->setup(ts[i]);
    }
  } catch (...) {
    // Out of memory part way (curl_easy_init): the handles taken so far go back, or they and
    // their header lists would leak for the daemon's life.
    for (Transfer& t : ts) {
      if (!t.easy) continue;
      curl_slist_free_all(t.headers);
      t.headers = nullptr;
      impl_->give_handle(t.easy);
    }
    throw;
  }
  batch.remaining = reqs.size();
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stop) {
      for (auto& t : ts) {
        curl_slist_free_all(t.headers);
        curl_easy_cleanup(t.easy);
        resps[&t - ts.data()].curl_code = CURLE_ABORTED_BY_CALLBACK;
      }
      return resps;
    }
    for (auto& t : ts) impl_->pending.push_back(&t);
  }
  curl_multi_wakeup(impl_->multi);
  std::unique_lock lock(batch.mu);
  batch.cv.wait(lock, [&] { return batch.remaining == 0; });
  return resps;
}

bool Client::transient(int code) {
  switch (static_cast<CURLcode>(code)) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
    case CURLE_AGAIN: return true;
    default: return false;
  }
}

std::string uri_encode(std::string_view s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3 / 2);
  for (unsigned char c : s) {
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (alnum || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

bool parse_content_range(std::string_view v, ContentRange* out) {
  if (!v.starts_with("bytes ")) return false;
  v.remove_prefix(6);
  auto number = [&v](uint64_t* n) {
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *n);  // digits only: no sign
    if (ec != std::errc() || end == v.data()) return false;
    v.remove_prefix(static_cast<size_t>(end - v.data()));
    return true;
  };
  ContentRange cr;
  if (!number(&cr.first) || !v.starts_with('-')) return false;
  v.remove_prefix(1);
  if (!number(&cr.last) || !v.starts_with('/') || cr.first > cr.last) return false;
  v.remove_prefix(1);
  if (v != "*") {
    if (!number(&cr.total) || !v.empty() || cr.last >= cr.total) return false;
    cr.total_known = true;
  }
  *out = cr;
  return true;
}

}  // namespace prepfs::http

#include "prepfs/http/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "prepfs/common/error.h"
#include "prepfs_config.h"

#if HAVE_MICROHTTPD
#include <microhttpd.h>
#endif

namespace prepfs {

ListenAddr parse_listen_addr(const std::string& addr) {
  auto bad = [&](const std::string& why) { return Error(EINVAL, "option metrics_addr=" + addr + ": " + why); };
  ListenAddr out;
  std::string port;
  if (!addr.empty() && addr[0] == '[') {
    size_t close = addr.find(']');
    if (close == std::string::npos || close + 1 >= addr.size() || addr[close + 1] != ':')
      throw bad("expected [IPV6]:PORT");
    out.host = addr.substr(1, close - 1);
    port = addr.substr(close + 2);
  } else {
    size_t colon = addr.rfind(':');
    if (colon == std::string::npos || addr.find(':') != colon)
      throw bad("expected HOST:PORT, for example 127.0.0.1:9100");
    out.host = addr.substr(0, colon);
    port = addr.substr(colon + 1);
  }
  unsigned char buf[sizeof(in6_addr)];
  if (inet_pton(AF_INET, out.host.c_str(), buf) != 1 && inet_pton(AF_INET6, out.host.c_str(), buf) != 1)
    throw bad("the host must be a numeric IPv4 or IPv6 address");
  char* end = nullptr;
  unsigned long p = std::strtoul(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p > 65535) throw bad("the port must be a number in [0, 65535]");
  out.port = static_cast<unsigned>(p);
  return out;
}

void MetricsHttpServer::check(const std::string& addr) {
  parse_listen_addr(addr);
  if (!available())
    throw Error(ENOTSUP, "metrics_addr=" + addr +
                             ": this prepfs was built without libmicrohttpd; "
                             "read MOUNTPOINT/.prepfs/metrics instead");
}

#if HAVE_MICROHTTPD
namespace {

MHD_Result reply(MHD_Connection* conn, unsigned status, const std::string& body, const char* type) {
  MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", type);
  MHD_Result rc = MHD_queue_response(conn, status, r);
  MHD_destroy_response(r);
  return rc;
}

MHD_Result handle(void* cls, MHD_Connection* conn, const char* url, const char* method, const char*, const char*,
                  size_t* upload_size, void** con_cls) {
  // The first call per request only announces the headers; answer on the second (no body expected).
  static int marker;
  if (*con_cls != &marker) {
    *con_cls = &marker;
    return MHD_YES;
  }
  if (*upload_size != 0) {
    *upload_size = 0;  // ignore any body
    return MHD_YES;
  }
  auto* self = static_cast<MetricsHttpServer*>(cls);
  if (std::strcmp(method, "GET") != 0 && std::strcmp(method, "HEAD") != 0)
    return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET\n", "text/plain; charset=utf-8");
  if (std::strcmp(url, "/metrics") == 0) {
    std::string body;
    try {
      body = self->render()();
    } catch (const std::exception& e) {
      return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, std::string(e.what()) + "\n", "text/plain; charset=utf-8");
    }
    return reply(conn, MHD_HTTP_OK, body, "text/plain; version=0.0.4; charset=utf-8");
  }
  if (std::strcmp(url, "/") == 0)
    return reply(conn, MHD_HTTP_OK, "prepfs: metrics at /metrics\n", "text/plain; charset=utf-8");
  return reply(conn, MHD_HTTP_NOT_FOUND, "not found; metrics are at /metrics\n", "text/plain; charset=utf-8");
}

}  // namespace

bool MetricsHttpServer::available() { return true; }

MetricsHttpServer::MetricsHttpServer(const std::string& addr, Render render) : render_(std::move(render)) {
  ListenAddr la = parse_listen_addr(addr);
  sockaddr_storage ss{};
  // MHD_USE_AUTO: epoll here. Alone, the internal thread used select(), which closes every socket
  // numbered 1024 or more (a daemon with many S3 connections and cache files open): scrapes
  // failed, or the server did not start at all.
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
  if (la.host.find(':') != std::string::npos) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(static_cast<uint16_t>(la.port));
    inet_pton(AF_INET6, la.host.c_str(), &a6->sin6_addr);
    flags |= MHD_USE_IPv6;
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&ss);
    a4->sin_family = AF_INET;
    a4->sin_port = htons(static_cast<uint16_t>(la.port));
    inet_pton(AF_INET, la.host.c_str(), &a4->sin_addr);
  }
  errno = 0;
  MHD_Daemon* d = MHD_start_daemon(flags, static_cast<uint16_t>(la.port), nullptr, nullptr, &handle, this,
                                   MHD_OPTION_SOCK_ADDR, reinterpret_cast<sockaddr*>(&ss), MHD_OPTION_CONNECTION_LIMIT,
                                   64u, MHD_OPTION_PER_IP_CONNECTION_LIMIT, 16u,  // one client cannot hold all 64
                                   MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
  if (!d) {
    int err = errno ? errno : EADDRINUSE;
    throw Error(err, "metrics_addr=" + addr + ": cannot listen: " + std::strerror(err));
  }
  daemon_ = d;
  const MHD_DaemonInfo* info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  port_ = info ? info->port : la.port;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (daemon_) MHD_stop_daemon(static_cast<MHD_Daemon*>(daemon_));
}

#else

bool MetricsHttpServer::available() { return false; }

MetricsHttpServer::MetricsHttpServer(const std::string& addr, Render render) : render_(std::move(render)) {
  check(addr);  // throws: nothing to serve with
}

MetricsHttpServer::~MetricsHttpServer() = default;

#endif

}  // namespace prepfs

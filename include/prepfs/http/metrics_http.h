// The optional HTTP endpoint for Prometheus (-o metrics_addr=HOST:PORT), served by libmicrohttpd
// on its own thread: GET /metrics answers the same text as .prepfs/metrics.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace prepfs {

struct ListenAddr {
  std::string host;  // numeric IPv4 or IPv6 (brackets removed)
  unsigned port = 0;
};
// Parses "127.0.0.1:9100" or "[::1]:9100". Throws Error(EINVAL) naming the option.
ListenAddr parse_listen_addr(const std::string& addr);

class MetricsHttpServer {
 public:
  using Render = std::function<std::string()>;
  // Listens at once; throws Error with a clear message when it cannot (address in use, or the
  // build has no libmicrohttpd).
  MetricsHttpServer(const std::string& addr, Render render);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  static bool available();                 // built with libmicrohttpd
  // What the constructor checks before it binds: the address parses and the build can serve it
  // (throws as the constructor would). For a usage error at start, before any work.
  static void check(const std::string& addr);
  unsigned port() const { return port_; }  // the bound port (useful with port 0)
  const Render& render() const { return render_; }

 private:
  Render render_;
  void* daemon_ = nullptr;  // MHD_Daemon
  unsigned port_ = 0;
};

}  // namespace prepfs

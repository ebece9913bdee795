// The Prometheus text writer, the latency histogram and the metrics_addr parser.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include <cerrno>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "prepfs/common/error.h"
#include "prepfs/common/json_text.h"
#include "prepfs/common/stats.h"
#include "prepfs/http/metrics_http.h"
#include "prepfs/observe/metrics.h"

namespace prepfs {
namespace {

// Names go into .prepfs/stats between quotes: a memcached server named with a quote (the
// shared= parser allows it) made the whole file invalid JSON, and prepctl stats failed.
TEST(JsonText, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(json_escaped("plain:11211"), "plain:11211");
  EXPECT_EQ(json_escaped("a\"b\\c"), "a\\\"b\\\\c");
  EXPECT_EQ(json_escaped(std::string_view("tab\tnl\n\x01\0", 9)), "tab\\u0009nl\\u000a\\u0001\\u0000");
  EXPECT_EQ(json_escaped("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 passes as it is
}

TEST(LatencyHistogram, BucketsByUpperBound) {
  LatencyHistogram h;
  h.record(0);
  h.record(50'000);          // exactly on the first bound: counted there (le)
  h.record(50'001);          // next bucket
  h.record(10'000'000'000);  // beyond every bound: +Inf
  EXPECT_EQ(load(h.buckets[0]), 2u);
  EXPECT_EQ(load(h.buckets[1]), 1u);
  EXPECT_EQ(load(h.buckets[LatencyHistogram::kBuckets - 1]), 1u);
  EXPECT_EQ(load(h.sum_ns), 50'000u + 50'001u + 10'000'000'000u);
}

TEST(LatencyHistogram, ConcurrentRecordsAreAllCounted) {
  LatencyHistogram h;
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++)
    ts.emplace_back([&h, t] {
      for (int i = 0; i < 10000; i++) h.record(static_cast<uint64_t>(i * 1000 + t));
    });
  for (auto& t : ts) t.join();
  uint64_t n = 0;
  for (const auto& b : h.buckets) n += load(b);
  EXPECT_EQ(n, 40000u);
}

TEST(PromText, HistogramIsCumulativeAndEndsWithInf) {
  LatencyHistogram h;
  for (uint64_t ns : {10'000ull, 200'000ull, 200'000ull, 3'000'000'000ull}) h.record(ns);
  PromText p;
  p.histogram_seconds("x_seconds", "help", h);
  const std::string& t = p.str();
  EXPECT_NE(t.find("# TYPE x_seconds histogram\n"), std::string::npos);
  EXPECT_NE(t.find("x_seconds_bucket{le=\"5e-05\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("x_seconds_bucket{le=\"0.00025\"} 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("x_seconds_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << t;
  EXPECT_NE(t.find("x_seconds_count 4\n"), std::string::npos) << t;
  EXPECT_NE(t.find("x_seconds_sum 3.00041\n"), std::string::npos) << t;
  // Bucket counts never decrease.
  std::istringstream in(t);
  std::string line;
  uint64_t last = 0;
  while (std::getline(in, line)) {
    if (line.rfind("x_seconds_bucket", 0) != 0) continue;
    uint64_t v = std::stoull(line.substr(line.rfind(' ') + 1));
    EXPECT_GE(v, last);
    last = v;
  }
}

TEST(PromText, EveryLineIsWellFormed) {
  PromText p;
  p.family("a_total", "counter", "A help with a \\ backslash\nand a newline.");
  p.sample("a_total", {{"tier", "ram"}, {"path", "we\"ird\\name\n"}}, uint64_t{3});
  p.family("b", "gauge", "B.");
  p.sample("b", {}, 0.5);
  const std::regex help(R"(# HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*)");
  const std::regex type(R"(# TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge|histogram))");
  const std::regex sample(
      R"([a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*",?)*\})? [-+0-9.eEInfa]+)");
  std::istringstream in(p.str());
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    n++;
    bool ok = std::regex_match(line, help) || std::regex_match(line, type) || std::regex_match(line, sample);
    EXPECT_TRUE(ok) << line;
  }
  EXPECT_EQ(n, 6);
  EXPECT_NE(p.str().find(R"(path="we\"ird\\name\n")"), std::string::npos) << p.str();
  EXPECT_NE(p.str().find("# HELP a_total A help with a \\\\ backslash\\nand a newline.\n"), std::string::npos);
}

TEST(ListenAddr, ParsesIpv4AndBracketedIpv6) {
  ListenAddr a = parse_listen_addr("127.0.0.1:9100");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 9100u);
  ListenAddr b = parse_listen_addr("[::1]:0");
  EXPECT_EQ(b.host, "::1");
  EXPECT_EQ(b.port, 0u);
}

TEST(ListenAddr, RejectsWithTheOptionName) {
  for (const char* bad : {"localhost:9100", "127.0.0.1", "127.0.0.1:99999", "127.0.0.1:x", "::1:9100", "[::1]9100"}) {
    try {
      parse_listen_addr(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.err(), EINVAL);
      EXPECT_NE(std::string(e.what()).find("metrics_addr"), std::string::npos) << e.what();
    }
  }
}

// An HTTP GET of path from 127.0.0.1:port: the whole reply ("" when the connection fails).
std::string http_get(unsigned port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\n\r\n";
    if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == ssize_t(req.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) reply.append(buf, size_t(n));
    }
  }
  ::close(fd);
  return reply;
}

// libmicrohttpd's default loop is select(), which refuses sockets numbered 1024 or more: with
// that many descriptors open (S3 connections, cache files) the endpoint failed to start, or closed
// each scrape at once. It polls with epoll now.
TEST(MetricsHttpServer, ServesWithOverAThousandDescriptorsOpen) {
  if (!MetricsHttpServer::available()) GTEST_SKIP() << "built without libmicrohttpd";
  rlimit lim{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_max < 1200) GTEST_SKIP() << "cannot open 1100 descriptors here (hard limit " << lim.rlim_max << ")";
  const rlimit before = lim;
  lim.rlim_cur = std::max<rlim_t>(lim.rlim_cur, 1200);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lim), 0);
  std::vector<int> held;
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) {
    held.push_back(fd);
    if (fd >= 1030) break;
  }
  std::string reply;
  try {
    MetricsHttpServer server("127.0.0.1:0", [] { return std::string("prepfs_up 1\n"); });
    reply = http_get(server.port(), "/metrics");
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  for (int fd : held) ::close(fd);
  ::setrlimit(RLIMIT_NOFILE, &before);
  EXPECT_NE(reply.find(" 200 "), std::string::npos) << reply;
  EXPECT_NE(reply.find("prepfs_up 1"), std::string::npos) << reply;
}

}  // namespace
}  // namespace prepfs

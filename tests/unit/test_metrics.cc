// The Prometheus text writer, the latency histogram and the metrics_addr parser.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace prepfs

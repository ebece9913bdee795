// A real memcached server on loopback for one test: started on a free port, stopped (by its pid)
// when the object goes. The tests of the shared tier run against it, not against a fake.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace prepfs::test {

// A loopback port nothing listens on right now.
inline uint16_t free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

inline bool connectable(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

class MemcachedServer {
 public:
  explicit MemcachedServer(std::vector<std::string> extra = {}, uint16_t port = 0)
      : port_(port ? port : free_port()), extra_(std::move(extra)) {
    start();
  }
  ~MemcachedServer() { stop(); }
  MemcachedServer(const MemcachedServer&) = delete;
  MemcachedServer& operator=(const MemcachedServer&) = delete;

  uint16_t port() const { return port_; }
  void start() {
    std::vector<std::string> args = {"memcached", "-l", "127.0.0.1", "-p", std::to_string(port_),
                                     "-U",        "0",  "-m",        "64"};
    if (geteuid() == 0) args.insert(args.end(), {"-u", "root"});
    args.insert(args.end(), extra_.begin(), extra_.end());
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp("memcached", argv.data());
      _exit(127);
    }
    for (int i = 0; i < 500 && !connectable(port_); i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!connectable(port_)) throw std::runtime_error("memcached did not start (is it installed?)");
  }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // A hung server: connections accepted by the kernel, nothing answered. Returns once stopped.
  void pause() {
    kill(pid_, SIGSTOP);
    int status = 0;
    waitpid(pid_, &status, WUNTRACED);
  }
  void resume() { kill(pid_, SIGCONT); }

 private:
  uint16_t port_;
  std::vector<std::string> extra_;
  pid_t pid_ = -1;
};

}  // namespace prepfs::test

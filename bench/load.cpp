// The serving benchmark's load generator, see load.hpp.
#include "bench/load.hpp"

#include "kserve.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

namespace salamander::bench {

namespace {

using steady = std::chrono::steady_clock;

// One call: true when it was answered with success; `error` says why not.
using call_fn = std::function<bool(std::string& error)>;

// `r` with its rate over `span` seconds and the percentiles of `latencies`.
load_result summed(load_result r, std::vector<double>& latencies, double span) {
  std::sort(latencies.begin(), latencies.end());
  auto at = [&](double q) {
    return latencies.empty()
               ? 0.0
               : latencies[std::min(latencies.size() - 1,
                                    static_cast<size_t>(q * static_cast<double>(latencies.size())))];
  };
  r.rps = static_cast<double>(r.ok) / span;
  r.p50_s = at(0.50);
  r.p99_s = at(0.99);
  return r;
}

// `workers` threads each making calls with its own `make_call()` until the
// time is up: a warm-up second, then `seconds` measured.
load_result closed_loop(int workers, double seconds,
                        const std::function<call_fn(int worker)>& make_call) {
  load_result r;
  std::mutex mutex;
  std::vector<double> latencies;
  std::atomic<int> phase{0}; // 0 warm-up, 1 measured, 2 done
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      auto call = make_call(w);
      std::vector<double> mine;
      int64_t ok = 0, failed = 0;
      std::string first_error;
      while (phase != 2) {
        auto start = steady::now();
        std::string error;
        bool good = call(error);
        auto took = std::chrono::duration<double>(steady::now() - start).count();
        if (phase == 1) {
          if (good) {
            ++ok;
            mine.push_back(took);
          } else {
            ++failed;
            if (first_error.empty()) {
              first_error = error;
            }
          }
        }
        if (!good && !error.empty() && error.rfind("connect", 0) == 0) {
          break; // nothing to talk to
        }
      }
      std::lock_guard<std::mutex> lock(mutex);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
      r.ok += ok;
      r.failed += failed;
      if (r.error.empty()) {
        r.error = first_error;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  auto t0 = steady::now();
  phase = 1;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  phase = 2;
  auto span = std::chrono::duration<double>(steady::now() - t0).count();
  for (auto& t : threads) {
    t.join();
  }
  return summed(r, latencies, span);
}

// A kept-alive HTTP/1.1 connection that sends one request and reads one
// answer at a time.
class http_connection {
public:
  http_connection(const std::string& host, int port) : host_(host), port_(port) {
    open();
  }
  ~http_connection() { close(); }
  http_connection(const http_connection&) = delete;
  http_connection& operator=(const http_connection&) = delete;

  bool call(const std::string& request, std::string& error) {
    if (fd_ < 0 && !open()) {
      error = "connect failed";
      return false;
    }
    for (size_t sent = 0; sent < request.size();) {
      auto n = ::send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) {
        error = "send failed";
        return false;
      }
      sent += static_cast<size_t>(n);
    }
    // headers, then Content-Length bytes of body
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill(error)) {
        return false;
      }
    }
    auto headers = buf_.substr(0, end);
    auto status_ok = headers.rfind("HTTP/1.1 200", 0) == 0;
    size_t length = 0;
    auto cl = headers.find("Content-Length: ");
    if (cl != std::string::npos) {
      length = std::stoul(headers.substr(cl + 16));
    }
    while (buf_.size() < end + 4 + length) {
      if (!fill(error)) {
        return false;
      }
    }
    buf_.erase(0, end + 4 + length);
    if (!status_ok) {
      error = headers.substr(0, headers.find("\r\n"));
    }
    // the server ends a kept-alive connection after so many requests; the
    // next call connects again, as a real client does
    if (headers.find("Connection: close") != std::string::npos) {
      close();
    }
    return status_ok;
  }

private:
  bool open() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    ::inet_pton(AF_INET, host_.c_str(), &addr.sin_addr);
    int yes = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close();
      return false;
    }
    return true;
  }

  void close() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
    fd_ = -1;
    buf_.clear();
  }

  std::string host_;
  int port_ = 0;
  bool fill(std::string& error) {
    char chunk[65536];
    auto n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) {
      error = "the server closed the connection";
      return false;
    }
    buf_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string buf_;
};

} // namespace

load_result http_load(const std::string& host, int port, const std::string& request,
                      int connections, double seconds) {
  return closed_loop(connections, seconds, [&](int) -> call_fn {
    auto conn = std::make_shared<http_connection>(host, port);
    return [conn, &request](std::string& error) { return conn->call(request, error); };
  });
}

load_result grpc_load(const std::string& address, const std::string& model,
                      const std::vector<int64_t>& shape, const std::string& raw, int streams,
                      double seconds) {
  inference::ModelInferRequest req;
  req.set_model_name(model);
  auto* in = req.add_inputs();
  in->set_name("input");
  in->set_datatype("FP32");
  for (auto d : shape) {
    in->add_shape(d);
  }
  req.add_raw_input_contents(raw);
  // asynchronous calls on one completion queue, as perf_analyzer drives
  // Triton: `streams` calls outstanding, each on a channel of its own
  // (channels with different arguments do not share a connection); a call
  // that completes is made again at once
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> stubs;
  for (int i = 0; i < streams; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("salamander.bench.stream", i);
    args.SetMaxReceiveMessageSize(64 << 20);
    stubs.push_back(inference::GRPCInferenceService::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args)));
  }
  struct call {
    int stream = 0;
    steady::time_point start;
    std::unique_ptr<grpc::ClientContext> ctx;
    inference::ModelInferResponse res;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<inference::ModelInferResponse>> rpc;
  };
  grpc::CompletionQueue cq;
  std::vector<call> calls(static_cast<size_t>(streams));
  auto begin = [&](call& c) {
    c.ctx = std::make_unique<grpc::ClientContext>();
    c.ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    c.res.Clear();
    c.start = steady::now();
    c.rpc = stubs[static_cast<size_t>(c.stream)]->AsyncModelInfer(c.ctx.get(), req, &cq);
    c.rpc->Finish(&c.res, &c.status, &c);
  };
  load_result r;
  std::vector<double> latencies;
  auto t_warm = steady::now() + std::chrono::seconds(1);
  auto t_end = t_warm + std::chrono::duration_cast<steady::duration>(
                            std::chrono::duration<double>(seconds));
  for (int i = 0; i < streams; ++i) {
    calls[static_cast<size_t>(i)].stream = i;
    begin(calls[static_cast<size_t>(i)]);
  }
  int outstanding = streams;
  while (outstanding > 0) {
    void* tag = nullptr;
    bool ok = false;
    if (!cq.Next(&tag, &ok)) {
      break;
    }
    auto& c = *static_cast<call*>(tag);
    auto now = steady::now();
    if (c.start >= t_warm && now <= t_end) {
      if (ok && c.status.ok() && c.res.raw_output_contents_size() == 1) {
        ++r.ok;
        latencies.push_back(std::chrono::duration<double>(now - c.start).count());
      } else {
        ++r.failed;
        if (r.error.empty()) {
          r.error = c.status.error_message();
        }
      }
    }
    if (now < t_end) {
      begin(c);
    } else {
      --outstanding;
    }
  }
  cq.Shutdown();
  return summed(r, latencies, seconds);
}

} // namespace salamander::bench

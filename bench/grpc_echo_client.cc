// `python -m bench grpc-calls`'s compiled client: the same unary call as its Python rounds (METHOD, a 300-byte
// message, CONCURRENCY in flight), through gRPC C++'s callback API on a generic stub (no generated code: the
// payload is bytes either way), the API a compiled proxy would use. One call connects before the clock starts;
// then CALLS calls, CONCURRENCY in flight, each completion starting the next. Prints one line of JSON: the
// process's CPU (getrusage: every thread, gRPC's own included) per call in ms, and calls per second.
//
//   grpc_echo_client TARGET METHOD CALLS CONCURRENCY
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

class Round {
 public:
  Round(grpc::GenericStub* stub, std::string method, const grpc::ByteBuffer* payload, std::string text, long calls)
      : stub_(stub), method_(std::move(method)), payload_(payload), text_(std::move(text)), left_(calls) {}

  // Starts CONCURRENCY calls and waits until every started call has completed; false if one failed or echoed
  // wrongly. A completion changes the counts, and notifies, under the lock, and touches nothing of the Round
  // after it unlocks: Run() may return, and the Round go, as soon as the last one has.
  bool Run(long concurrency) {
    for (long i = 0; i < concurrency; ++i) {
      std::unique_lock<std::mutex> lock(mu_);
      if (!Take()) break;
      lock.unlock();
      Start();
    }
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return in_flight_ == 0; });
    return !failed_;
  }

 private:
  struct Call {
    grpc::ClientContext context;
    grpc::ByteBuffer response;
  };

  // Under mu_: whether another call may start (one counted as in flight if so).
  bool Take() {
    if (left_ == 0 || failed_) return false;
    --left_;
    ++in_flight_;
    return true;
  }

  void Start() {
    auto* call = new Call;
    stub_->UnaryCall(&call->context, method_, grpc::StubOptions(), payload_, &call->response,
                     [this, call](grpc::Status status) { Done(call, status); });
  }

  void Done(Call* call, const grpc::Status& status) {
    std::string problem;
    if (!status.ok()) {
      problem = "call failed: " + std::to_string(status.error_code()) + " " + status.error_message();
    } else if (Text(call->response) != text_) {
      problem = "wrong echo: " + std::to_string(call->response.Length()) + " bytes";
    }
    delete call;
    if (!problem.empty()) std::fprintf(stderr, "%s\n", problem.c_str());
    bool next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      failed_ = failed_ || !problem.empty();
      --in_flight_;
      next = Take();
      if (in_flight_ == 0) done_cv_.notify_all();  // no call left: Run() returns once this unlocks
    }
    if (next) Start();  // in flight again: the Round stays until this call completes
  }

  static std::string Text(const grpc::ByteBuffer& buffer) {
    std::vector<grpc::Slice> slices;
    std::string text;
    if (!buffer.Dump(&slices).ok()) return text;
    for (const auto& slice : slices) text.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    return text;
  }

  grpc::GenericStub* stub_;
  const std::string method_;
  const grpc::ByteBuffer* payload_;
  const std::string text_;
  std::mutex mu_;
  std::condition_variable done_cv_;
  long left_;
  long in_flight_ = 0;
  bool failed_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s TARGET METHOD CALLS CONCURRENCY\n", argv[0]);
    return 2;
  }
  const std::string target = argv[1], method = argv[2];
  const long calls = std::atol(argv[3]), concurrency = std::atol(argv[4]);
  if (calls < 1 || concurrency < 1) {
    std::fprintf(stderr, "%s: CALLS and CONCURRENCY must be positive\n", argv[0]);
    return 2;
  }
  const std::string text(300, 'x');
  grpc::Slice slice(text);
  grpc::ByteBuffer payload(&slice, 1);
  grpc::GenericStub stub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  if (!Round(&stub, method, &payload, text, 1).Run(1)) return 1;  // connected before the clock starts
  const double cpu0 = cpu_seconds();
  const auto wall0 = std::chrono::steady_clock::now();
  if (!Round(&stub, method, &payload, text, calls).Run(concurrency)) return 1;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  std::printf("{\"cpu_ms_per_call\": %.6f, \"calls_per_s\": %.1f}\n", 1000 * (cpu_seconds() - cpu0) / calls,
              calls / wall);
  return 0;
}

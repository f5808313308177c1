// Positioned reads of expert slabs, many in flight, finished on I/O threads.
//
// Two engines behind one interface: io_uring (one ring; the caller submits,
// one thread reaps completions) and a pool of threads calling pread. Read
// descriptions are owned by the caller and reused, so submitting allocates
// nothing. Completions run on an I/O thread and must not block for long.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace colibri {

struct ReadOp {
  int fd = -1;
  uint64_t offset = 0;
  size_t length = 0;    // bytes requested
  size_t expected = 0;  // bytes that must arrive (< length only where the file ends)
  uint8_t* dst = nullptr;
  bool drop_cache = false;  // posix_fadvise(DONTNEED) the range once read (buffered fds)
  int tag = 0;              // the owner's id for the read
  size_t done = 0;          // bytes read so far (engine-owned while in flight)
};

struct IoEngineStats {
  uint64_t bytes = 0;
  uint64_t reads = 0;
  double busy_s = 0;  // wall time with at least one read in flight
};

class IoEngine {
 public:
  // Called once per op from an I/O thread; error is nullptr on success, else
  // a message ("read of 4096 bytes at offset 123: Input/output error").
  using Completion = void (*)(void* ctx, ReadOp& op, const char* error);
  // Called once per op just before its read starts (on an I/O thread, or
  // for io_uring on the thread that starts it): the owner makes the
  // destination resident (see StreamingExpertStore::fault_in).
  using Prepare = void (*)(void* ctx, ReadOp& op);

  virtual ~IoEngine() = default;
  // Starts the read; never blocks on I/O. Thread-safe. Urgent reads (someone
  // waits on them) start before every waiting read that is not.
  virtual void submit(ReadOp* op, bool urgent) = 0;
  virtual IoEngineStats stats() const = 0;
  virtual const char* name() const = 0;
};

// kind: "uring" or "pread". depth: reads in flight (uring) or threads (pread).
// max_ops: the most ops ever outstanding at once. prepare may be null. Where
// io_uring cannot be set up (old kernel, seccomp), falls back to pread and
// says why in *note.
std::unique_ptr<IoEngine> make_io_engine(const std::string& kind, int depth, int max_ops,
                                         IoEngine::Completion done, IoEngine::Prepare prepare,
                                         void* ctx, std::string* note);

}  // namespace colibri

// Continual learning from a stream (FTPipeHD's third experiment).
//
// Why: an edge device often learns from data that arrives while it trains
// (a camera, a sensor), not from a data set on disk. Samples come from a
// source over time; every `batch_size` of them, in arrival order, become
// batch g = 0, 1, 2, ..., and the batch is written to an on-disk log before
// training may use it. Pipeline training asks for batch g and waits while it
// has not arrived. A rollback after a failure replays batches from the log,
// so the replay sees exactly what the lost run saw, and the audit still
// shows every batch once. The log is bounded: batches a recovery can no
// longer roll back to are deleted.
//
// Sources ("--stream"):
//   replay:RATE      Fashion-MNIST's training split in a seeded random order,
//                    RATE samples per second (experiments; EMULATED arrival)
//   file:PATH        a file being appended to: records of one label byte and
//                    C*H*W pixel bytes; read as it grows
//   tcp:HOST:PORT    listens there; a producer connects and sends records
//                    (one producer at a time)
// Samples are Fashion-MNIST-shaped bytes (1x28x28) and are normalised as the
// data set is. A stream opened on a log directory that holds batches carries
// on after its last one: the replay and file sources from where that batch
// ended; a TCP producer must send again what was not yet logged.
//
// Log files: DIR/batch-NNNNNNNNNNNN.bin, written atomically:
//   "SALMSTRM" | u64 batch | u32 samples | u32 sample bytes | u64 source
//   position after the batch | u32 CRC-32 of the body | u32 0 | labels | pixels
#pragma once

#include "models/data.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace salamander::actors {

struct stream_options {
  std::string source;  ///< replay:RATE, file:PATH or tcp:HOST:PORT
  std::string log_dir; ///< where batches are logged (created)
  int64_t batch_size = 64;
  uint64_t seed = 1;     ///< replay: the order
  std::string data_dir;  ///< replay: Fashion-MNIST's location
  uint64_t keep = 256;   ///< batches kept behind the oldest still needed
  double idle_end_s = 0; ///< file, tcp: the stream ends after this long without
                         ///< data (0: never)
};

/// Throws std::invalid_argument naming what is wrong with `source`.
void check_stream_source(const std::string& source);

class sample_stream {
public:
  /// Opens the log (carrying on from the batches in it) and starts reading
  /// the source on a thread of its own. Throws std::invalid_argument for a
  /// bad source or models::data_error for an unreadable log.
  explicit sample_stream(stream_options opts);
  ~sample_stream();
  sample_stream(const sample_stream&) = delete;
  sample_stream& operator=(const sample_stream&) = delete;

  /// Batch g, once it has arrived (normalised images, int64 labels). Throws
  /// models::data_error if g was logged and has been deleted or is damaged.
  std::optional<models::batch> get(uint64_t g);
  /// Batches logged so far (0..arrived()-1 exist or existed).
  uint64_t arrived() const { return arrived_.load(); }
  /// The source has ended: no batch beyond arrived() will come.
  bool ended() const { return ended_.load(); }
  /// Why the source stopped, if it failed ("" otherwise).
  std::string failure() const;
  /// Batches below `g` will not be asked for again, except by a rollback no
  /// further than `keep` behind it: older ones are deleted.
  void release_below(uint64_t g);
  /// Samples read from the source so far (logged or waiting for a batch).
  uint64_t samples() const { return samples_.load(); }
  const stream_options& options() const { return opts_; }

private:
  void run();
  void read_replay(double rate);
  void read_file(const std::string& path);
  void read_tcp(const std::string& host, uint16_t port);
  /// Takes bytes of records; logs every full batch. `position` is the
  /// source position after these bytes.
  void take(const unsigned char* data, size_t n, uint64_t position);
  void log_batch();
  std::string batch_path(uint64_t g) const;
  bool stopping() const { return stop_.load(); }
  void wait_for(double seconds);

  stream_options opts_;
  size_t record_bytes_ = 0;
  std::string pending_; ///< records of the batch being filled (and a part record)
  size_t checked_ = 0;    ///< whole records in pending_ (their labels checked)
  uint64_t position_ = 0; ///< source position after the last logged batch
  uint64_t resume_position_ = 0;
  std::atomic<uint64_t> arrived_{0};
  std::atomic<uint64_t> samples_{0};
  std::atomic<bool> ended_{false};
  std::atomic<bool> stop_{false};
  uint64_t deleted_below_ = 0;
  mutable std::mutex mutex_; ///< failure_, deleted_below_, the sleep
  std::condition_variable wake_;
  std::string failure_;
  int listen_fd_ = -1;
  std::thread thread_;
};

} // namespace salamander::actors

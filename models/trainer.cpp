#include "models/trainer.hpp"

#include "algorithms/sampling.hpp"

#include <chrono>

namespace salamander::models {

std::vector<torch::Tensor> split_micro(const torch::Tensor& batch, int64_t m) {
  if (m < 1) {
    throw std::invalid_argument("micro-batches must be >= 1, got " + std::to_string(m));
  }
  int64_t n = batch.size(0);
  if (n < m) {
    throw std::invalid_argument("a batch of " + std::to_string(n) + " rows cannot be split into " +
                                std::to_string(m) + " micro-batches");
  }
  std::vector<torch::Tensor> out;
  int64_t start = 0;
  for (int64_t i = 0; i < m; ++i) {
    int64_t len = n / m + (i < n % m ? 1 : 0);
    out.push_back(batch.slice(0, start, start + len));
    start += len;
  }
  return out;
}

batch_report train_step(range_executor& exec, torch::optim::Optimizer& opt, const batch& b,
                        int64_t micro_batches) {
  opt.zero_grad();
  auto xs = split_micro(b.x, micro_batches);
  auto ys = split_micro(b.y, micro_batches);
  batch_report r;
  r.samples = b.x.size(0);
  for (int64_t i = 0; i < micro_batches; ++i) {
    exec.forward(i, xs[static_cast<size_t>(i)]);
    // Weighting by micro-batch size makes the accumulated gradient the
    // gradient of the mean loss over the whole batch.
    double weight = static_cast<double>(xs[static_cast<size_t>(i)].size(0)) /
                    static_cast<double>(r.samples);
    auto lr = exec.loss_backward(i, ys[static_cast<size_t>(i)], weight);
    r.loss += lr.loss * weight;
    r.correct += lr.correct;
  }
  opt.step();
  return r;
}

epoch_stats train_epoch(range_executor& exec, torch::optim::Optimizer& opt,
                        const dataset& data, uint64_t epoch, const train_options& opts,
                        const std::function<void(const batch_report&)>& on_batch) {
  auto start = std::chrono::steady_clock::now();
  exec.net()->train();
  int64_t batches = algorithms::batches_per_epoch(data.size(), opts.batch_size, false);
  if (opts.max_batches > 0) {
    batches = std::min(batches, opts.max_batches);
  }
  epoch_stats s;
  int64_t correct = 0;
  double loss_sum = 0.0;
  for (int64_t b = 0; b < batches; ++b) {
    auto bt = get_batch(data, opts.seed, epoch, b, opts.batch_size);
    int64_t m = std::min<int64_t>(opts.micro_batches, bt.x.size(0));
    if (opts.warmup_batches > 0) {
      auto run_batch = static_cast<uint64_t>(static_cast<int64_t>(epoch) * batches + b);
      set_lr(opt, warmup_lr(opts.lr, run_batch, opts.warmup_batches));
    }
    auto r = train_step(exec, opt, bt, m);
    r.batch = b;
    r.batches = batches;
    s.batches++;
    s.samples += r.samples;
    correct += r.correct;
    loss_sum += r.loss * static_cast<double>(r.samples);
    if (on_batch) {
      on_batch(r);
    }
  }
  s.mean_loss = s.samples ? loss_sum / static_cast<double>(s.samples) : 0.0;
  s.train_accuracy = s.samples ? static_cast<double>(correct) / static_cast<double>(s.samples) : 0;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

double eval_stats::weighted_accuracy(const std::vector<int64_t>& histogram) const {
  double acc = 0, weight = 0;
  for (size_t k = 0; k < histogram.size() && k < class_samples.size(); ++k) {
    if (class_samples[k] > 0 && histogram[k] > 0) {
      auto w = static_cast<double>(histogram[k]);
      acc += w * static_cast<double>(class_correct[k]) /
             static_cast<double>(class_samples[k]);
      weight += w;
    }
  }
  return weight > 0 ? acc / weight : 0.0;
}

eval_stats evaluate(torch::nn::Sequential& net, const dataset& data, int64_t batch_size) {
  torch::NoGradGuard no_grad;
  bool was_training = net->is_training();
  net->eval();
  eval_stats s;
  double loss_sum = 0.0;
  for (int64_t begin = 0; begin < data.size(); begin += batch_size) {
    auto b = get_range(data, begin, std::min(data.size(), begin + batch_size));
    auto logits = net->forward(b.x);
    loss_sum += torch::nn::functional::cross_entropy(
                    logits, b.y,
                    torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .item<double>();
    s.correct += count_correct(logits, b.y);
    s.samples += b.x.size(0);
    auto right = logits.argmax(1).eq(b.y).to(torch::kInt64);
    auto seen = torch::bincount(b.y).contiguous();
    auto hits = torch::bincount(b.y, right).to(torch::kInt64).contiguous();
    auto n = static_cast<size_t>(seen.size(0));
    if (s.class_samples.size() < n) {
      s.class_samples.resize(n, 0);
      s.class_correct.resize(n, 0);
    }
    for (size_t k = 0; k < n; ++k) {
      s.class_samples[k] += seen.data_ptr<int64_t>()[k];
      s.class_correct[k] += hits.data_ptr<int64_t>()[k];
    }
  }
  s.mean_loss = s.samples ? loss_sum / static_cast<double>(s.samples) : 0.0;
  net->train(was_training);
  return s;
}

} // namespace salamander::models

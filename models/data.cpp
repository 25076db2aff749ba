#include "models/data.hpp"

#include "algorithms/sampling.hpp"

#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

namespace salamander::models {

namespace fs = std::filesystem;

namespace {

// Fashion-MNIST training-set statistics (Xiao et al. 2017).
constexpr double fmnist_mean = 0.2860;
constexpr double fmnist_std = 0.3530;
const shape fmnist_sample = {1, 28, 28};
constexpr int64_t fmnist_classes = 10;
// Large enough for any IDX file we read; a header claiming more is corrupt.
constexpr int64_t max_idx_bytes = int64_t{1} << 31;

std::vector<unsigned char> slurp(const std::string& path) {
  // gzread reads raw files transparently, so one path serves both.
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzopen(path.c_str(), "rb"), gzclose);
  if (!f) {
    throw data_error("cannot open " + path);
  }
  std::vector<unsigned char> out;
  unsigned char buf[1 << 16];
  for (;;) {
    int n = gzread(f.get(), buf, sizeof buf);
    if (n < 0) {
      int err = 0;
      throw data_error("cannot read " + path + ": " + gzerror(f.get(), &err));
    }
    if (n == 0) {
      break;
    }
    out.insert(out.end(), buf, buf + n);
    if (static_cast<int64_t>(out.size()) > max_idx_bytes) {
      throw data_error(path + " is larger than any IDX file salamander reads");
    }
  }
  return out;
}

uint32_t be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

std::string find_file(const std::vector<std::string>& dirs, const std::string& base,
                      std::vector<std::string>& tried) {
  for (auto& d : dirs) {
    for (auto& candidate : {d + "/" + base + ".gz", d + "/" + base}) {
      tried.push_back(candidate);
      if (fs::exists(candidate)) {
        return candidate;
      }
    }
  }
  return {};
}

} // namespace

shape dataset::sample_shape() const {
  auto s = images.sizes().vec();
  return {s.begin() + 1, s.end()};
}

std::vector<int64_t> dataset::label_vector() const {
  auto c = labels.contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

std::vector<std::string> fashion_mnist_dirs(const std::string& dir) {
  // A directory the user names is the only place looked: silently reading
  // other files than the ones asked for would be worse than an error.
  if (!dir.empty()) {
    return {dir};
  }
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("SALAMANDER_DATA"); env && *env) {
    dirs.push_back(env);
  }
  dirs.push_back("/usr/share/datasets/fashion-mnist");
  return dirs;
}

torch::Tensor read_idx(const std::string& path) {
  auto bytes = slurp(path);
  if (bytes.size() < 4) {
    throw data_error(path + " is truncated: no IDX header");
  }
  if (bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08) {
    throw data_error(path + " is not an IDX file of unsigned bytes (bad magic number)");
  }
  size_t dims = bytes[3];
  if (dims == 0 || dims > 4 || bytes.size() < 4 + 4 * dims) {
    throw data_error(path + " has a bad or truncated IDX header (" +
                     std::to_string(dims) + " dimensions)");
  }
  std::vector<int64_t> sizes;
  int64_t count = 1;
  for (size_t i = 0; i < dims; ++i) {
    sizes.push_back(be32(&bytes[4 + 4 * i]));
    count *= sizes.back();
    if (count > max_idx_bytes) {
      throw data_error(path + " claims more data than any IDX file salamander reads");
    }
  }
  size_t header = 4 + 4 * dims;
  if (bytes.size() - header != static_cast<size_t>(count)) {
    throw data_error(path + " holds " + std::to_string(bytes.size() - header) +
                     " data bytes but its header says " + std::to_string(count) +
                     (bytes.size() - header < static_cast<size_t>(count)
                          ? " (truncated)"
                          : " (trailing data)"));
  }
  auto t = torch::empty(sizes, torch::kUInt8);
  std::memcpy(t.data_ptr(), bytes.data() + header, static_cast<size_t>(count));
  return t;
}

batch read_fashion_mnist_bytes(bool train, const std::string& dir) {
  auto dirs = fashion_mnist_dirs(dir);
  std::string prefix = train ? "train" : "t10k";
  std::vector<std::string> tried;
  auto images_path = find_file(dirs, prefix + "-images-idx3-ubyte", tried);
  auto labels_path = find_file(dirs, prefix + "-labels-idx1-ubyte", tried);
  if (images_path.empty() || labels_path.empty()) {
    std::string list;
    for (auto& t : tried) {
      list += "\n  " + t;
    }
    throw data_error("Fashion-MNIST " + prefix +
                     " files not found. Install Debian's package with "
                     "'apt-get install dataset-fashion-mnist', or point --data or "
                     "$SALAMANDER_DATA at a directory holding them. Searched:" +
                     list);
  }
  auto images = read_idx(images_path);
  auto labels = read_idx(labels_path);
  if (images.dim() != 3 || labels.dim() != 1 || images.size(0) != labels.size(0)) {
    throw data_error("Fashion-MNIST files disagree: " + images_path + " has shape " +
                     to_string(images.sizes().vec()) + ", " + labels_path +
                     " has shape " + to_string(labels.sizes().vec()));
  }
  if (labels.max().item<int64_t>() >= fmnist_classes) {
    throw data_error(labels_path + " has a label outside 0..9");
  }
  return {images, labels};
}

torch::Tensor normalise_fashion_mnist(const torch::Tensor& bytes) {
  return bytes.unsqueeze(1)
      .to(torch::kFloat32)
      .div_(255.0)
      .sub_(fmnist_mean)
      .div_(fmnist_std);
}

dataset load_fashion_mnist(bool train, const std::string& dir) {
  auto raw = read_fashion_mnist_bytes(train, dir);
  dataset d;
  d.name = std::string("fashion-mnist/") + (train ? "train" : "t10k");
  d.images = normalise_fashion_mnist(raw.x);
  d.labels = raw.y.to(torch::kInt64);
  d.classes = fmnist_classes;
  return d;
}

dataset make_synthetic(uint64_t seed, int64_t n, const shape& sample, int64_t classes,
                       double noise) {
  if (n <= 0 || classes <= 0) {
    throw std::invalid_argument("synthetic data needs n > 0 and classes > 0");
  }
  auto gen = at::detail::createCPUGenerator(algorithms::mix_seed(seed, 0x5e7, 0));
  shape proto_shape = sample;
  proto_shape.insert(proto_shape.begin(), classes);
  auto prototypes = at::randn(proto_shape, gen);
  auto labels = at::randint(classes, {n}, gen, torch::kInt64);
  shape full = sample;
  full.insert(full.begin(), n);
  dataset d;
  d.name = "synthetic";
  d.images = prototypes.index_select(0, labels) + noise * at::randn(full, gen);
  d.labels = labels;
  d.classes = classes;
  return d;
}

void check_fits(const std::string& name, const model_desc& desc) {
  if (name == "synthetic") {
    return;
  }
  if (name != "fashion-mnist") {
    throw std::invalid_argument("unknown data set '" + name +
                                "'; use fashion-mnist or synthetic");
  }
  auto model = desc.spec.canonical();
  if (desc.input != fmnist_sample) {
    throw data_error(
        "model " + model + " takes " + to_string(desc.input) +
        " inputs but Fashion-MNIST images are " + to_string(fmnist_sample) +
        ": drop the image and channels options (or train on --dataset synthetic)");
  }
  if (desc.classes != fmnist_classes) {
    throw data_error(
        "model " + model + " has " + std::to_string(desc.classes) +
        " classes but Fashion-MNIST has " + std::to_string(fmnist_classes) +
        ": drop the classes option (default 10), or train on --dataset synthetic");
  }
}

dataset load_dataset(const std::string& name, bool train, const model_desc& desc,
                     const std::string& dir) {
  check_fits(name, desc);
  if (name == "fashion-mnist") {
    auto d = load_fashion_mnist(train, dir);
    if (d.sample_shape() != desc.input) {
      throw data_error("model " + desc.spec.canonical() + " takes " +
                       to_string(desc.input) + " inputs but Fashion-MNIST is " +
                       to_string(d.sample_shape()));
    }
    return d;
  }
  if (name == "synthetic") {
    // one draw, split: the test examples come from the same class prototypes
    auto all = make_synthetic(1, 4096 + 1024, desc.input, desc.classes);
    auto part = train ? get_range(all, 0, 4096) : get_range(all, 4096, 4096 + 1024);
    all.images = part.x.clone();
    all.labels = part.y.clone();
    all.name = train ? "synthetic/train" : "synthetic/test";
    return all;
  }
  throw std::invalid_argument("unknown data set '" + name +
                              "'; use fashion-mnist or synthetic");
}

batch get_batch(const dataset& data, uint64_t seed, uint64_t epoch, int64_t batch_id,
                int64_t batch_size, bool drop_last) {
  auto idx = algorithms::batch_indices(seed, epoch, batch_id, data.size(), batch_size,
                                       drop_last);
  auto index =
      torch::from_blob(idx.data(), {static_cast<int64_t>(idx.size())}, torch::kInt64);
  return {data.images.index_select(0, index), data.labels.index_select(0, index)};
}

batch get_range(const dataset& data, int64_t begin, int64_t end) {
  return {data.images.slice(0, begin, end), data.labels.slice(0, begin, end)};
}

} // namespace salamander::models

// StepGraphs: one instantiated CUDA graph per padded step size.
#include <algorithm>
#include <utility>

#include "lookahead_kernels.h"

namespace la::kern {

StepGraphs::StepGraphs(std::vector<int> buckets) : buckets_(std::move(buckets)) {
  std::sort(buckets_.begin(), buckets_.end());
  buckets_.erase(std::unique(buckets_.begin(), buckets_.end()), buckets_.end());
  buckets_.erase(std::remove_if(buckets_.begin(), buckets_.end(), [](int b) { return b <= 0; }), buckets_.end());
  execs_.assign(buckets_.size(), nullptr);
}

StepGraphs::~StepGraphs() { clear(); }

int StepGraphs::bucket_for(int T) const {
  for (int b : buckets_)
    if (b >= T) return b;
  return -1;
}

int StepGraphs::index_of(int bucket) const {
  auto it = std::lower_bound(buckets_.begin(), buckets_.end(), bucket);
  return it != buckets_.end() && *it == bucket ? int(it - buckets_.begin()) : -1;
}

bool StepGraphs::captured(int bucket) const {
  const int i = index_of(bucket);
  return i >= 0 && execs_[i] != nullptr;
}

cudaError_t StepGraphs::capture(int bucket, cudaStream_t stream, const std::function<void(cudaStream_t)>& body,
                                cudaStreamCaptureMode mode) {
  const int i = index_of(bucket);
  if (i < 0 || !body) return cudaErrorInvalidValue;
  cudaError_t e = cudaStreamBeginCapture(stream, mode);
  if (e != cudaSuccess) return e;
  cudaGraph_t graph = nullptr;
  try {
    body(stream);
  } catch (...) {
    if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    throw;
  }
  e = cudaStreamEndCapture(stream, &graph);
  if (e != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    return e;
  }
  cudaGraphExec_t exec = nullptr;
  e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) return e;
  if (execs_[i]) cudaGraphExecDestroy(execs_[i]);
  execs_[i] = exec;
  return cudaSuccess;
}

cudaError_t StepGraphs::replay(int bucket, cudaStream_t stream) const {
  const int i = index_of(bucket);
  if (i < 0 || !execs_[i]) return cudaErrorInvalidValue;
  return cudaGraphLaunch(execs_[i], stream);
}

void StepGraphs::clear() {
  for (auto& e : execs_) {
    if (e) cudaGraphExecDestroy(e);
    e = nullptr;
  }
}

}  // namespace la::kern

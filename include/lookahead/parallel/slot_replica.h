// One replica's batch slots (lookahead parallelism with --batch): slot s is a LocalExecutor over the replica's
// model (s = 0) or a fork of it (made when the slot first opens), so the replica holds every slot's KV cache. A
// batched step stages, per slot, a prompt chunk (every replica runs it) or this replica's part of the slot's plan,
// then runs them all in ONE StepModel::forward_batch. Used by every replica group's replicas: the in-process group
// (replica_group.h), rank 0 of the comm group and the workers (src/dist). No libtorch, no MPI.
//
// Input from another rank is checked here (a slot out of range or not begun, a slot staged twice in one step, a
// chunk beyond the prompt): la::Error("protocol error: ..."), never a wrong cache.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "lookahead/decode/executor.h"
#include "lookahead/model/step_model.h"

namespace la {

class SlotReplica {
 public:
  static constexpr int kMaxSlots = 4096;  // the protocol's bound on slot numbers

  // `model` must outlive the replica; it is slot 0's, and forks of it are the other slots'.
  explicit SlotReplica(StepModel& model);
  ~SlotReplica();

  // A request starts in `slot`: an empty cache sized for `rows` rows (the prompt is fed by chunks or as the first
  // part's pending chain).
  void begin(int slot, const std::vector<int32_t>& prompt, const SampleParams& sp, int rows);
  // The accepted path of the slot's last part, in the part's local node indices (LocalExecutor::commit).
  void commit(int slot, const std::vector<int32_t>& seq, const std::vector<int32_t>& local_path);
  void end(int slot);
  int cache_len(int slot) const;

  // ---- One step: clear, stage items, forward, read the items.
  void clear() { n_ = 0; }
  void stage_chunk(int slot, const std::vector<int32_t>& seq, int tokens);
  void stage_part(int slot, const std::vector<int32_t>& seq, const StepPlan& plan);
  // One forward_batch over every staged item (nothing if none); chunks are committed. Returns its seconds.
  double forward();
  struct Item {
    int slot = 0;
    bool chunk = false;
    int cache_len = 0;    // the slot's cache length when it was staged
    int step_tokens = 0;  // rows in the forward
    std::vector<int32_t> results;  // a part's result per plan node (empty for a chunk)
  };
  int items() const { return n_; }
  Item& item(int i) { return items_[i]; }

 private:
  struct Slot;
  Slot& at(int slot, const char* what);
  const Slot& at(int slot, const char* what) const;
  Item& next_item(int slot, bool chunk);

  StepModel& model_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<Item> items_;     // reused across steps (capacity kept)
  std::vector<BatchItem> batch_;
  int n_ = 0;
  int max_rows_ = 0;  // the most rows any slot began with (begin: every item's results buffer holds them)
};

}  // namespace la

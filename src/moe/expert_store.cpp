#include "moe/expert_store.h"

#include "base/error.h"

namespace colibri {

MappedExpertStore::MappedExpertStore(std::vector<ExpertTensors> layers)
    : layers_(std::move(layers)) {}

ExpertWeights MappedExpertStore::acquire(int layer, int expert) {
  CLB_ASSERT(layer >= 0 && static_cast<size_t>(layer) < layers_.size());
  const ExpertTensors& t = layers_[layer];
  CLB_ASSERT(expert >= 0 && expert < t.gate_exps.ne[2]);
  ++stats_.requests;
  ++stats_.hits;
  return {t.gate_exps.slab(expert), t.up_exps.slab(expert), t.down_exps.slab(expert)};
}

}  // namespace colibri

#include "comm/plan/algo_setting.hpp"

#include "core/error.hpp"

namespace ouro {

AlgoSetting parseAlgoSetting(const std::string& text) {
  if (text == "auto") return AlgoSetting::kAuto;
  if (text == "direct") return AlgoSetting::kDirect;
  if (text == "pairwise" || text == "ring") return AlgoSetting::kPairwise;
  if (text == "one-shot" || text == "latency") return AlgoSetting::kOneShot;
  if (text == "hierarchical") return AlgoSetting::kHierarchical;
  if (text == "gather-fold") return AlgoSetting::kGatherFold;
  if (text == "doubling") return AlgoSetting::kDoubling;
  if (text == "halving-doubling") return AlgoSetting::kHalvingDoubling;
  raise(Result::kInvalidArgument,
        "OURO_ALGO=%s is not one of auto, direct, pairwise, one-shot, hierarchical, gather-fold, doubling, "
        "halving-doubling (ring and latency are accepted for pairwise and one-shot); see docs/SETTINGS.md",
        text.c_str());
}

kernels::FoldOrder parseOrderSetting(const std::string& text) {
  if (text == "tree") return kernels::FoldOrder::kTree;
  if (text == "rank") return kernels::FoldOrder::kRank;
  raise(Result::kInvalidArgument,
        "OURO_ORDER=%s is not tree (the canonical tree over the ranks, the default) or rank (the left fold in rank "
        "order); see docs/API.md \"Reproducible reductions\"",
        text.c_str());
}

const char* orderSettingName(kernels::FoldOrder order) { return order == kernels::FoldOrder::kTree ? "tree" : "rank"; }

const char* algoSettingName(AlgoSetting setting) {
  switch (setting) {
    case AlgoSetting::kAuto: return "auto";
    case AlgoSetting::kDirect: return "direct";
    case AlgoSetting::kPairwise: return "pairwise";
    case AlgoSetting::kOneShot: return "one-shot";
    case AlgoSetting::kHierarchical: return "hierarchical";
    case AlgoSetting::kGatherFold: return "gather-fold";
    case AlgoSetting::kDoubling: return "doubling";
    case AlgoSetting::kHalvingDoubling: return "halving-doubling";
  }
  return "unknown";
}

}  // namespace ouro

// AMD's flash attention kernel (attention_amd.cuh) on RDNA4's WMMA (gfx12): the instruction where the
// target has it, the layout's emulation in CUDA builds.
#include "ops/gpu/attention_amd.cuh"

namespace hd::gpu {

void flash_attention_wmma12(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const AttentionArgs& a) {
  amd_attention::dispatch_type<FragmentsWmma<12, amd_attention::kEmulated>>(q, k, v, out, a);
}

}  // namespace hd::gpu

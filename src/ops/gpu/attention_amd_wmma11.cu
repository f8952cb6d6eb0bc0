// AMD's flash attention kernel (attention_amd.cuh) on RDNA3's WMMA (gfx11): the instruction where the
// target has it, the layout's emulation in CUDA builds.
#include "ops/gpu/attention_amd.cuh"

namespace hd::gpu {

void flash_attention_wmma11(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const AttentionArgs& a) {
  amd_attention::dispatch_type<FragmentsWmma<11, amd_attention::kEmulated>>(q, k, v, out, a);
}

}  // namespace hd::gpu

// What ending a CUDA process costs, apart from what it did (tools/device/exit_probe.sh runs it): the
// process prints the wall clock just before it ends (std::_Exit, as the CLI does) and the script
// subtracts that from the moment the shell saw it end. Modes: 0 a context only; 1 one 3 GiB device
// allocation, written; 2 the same in 300 allocations; 3 128 MiB of page-locked host memory; 4 a CUDA
// graph of 1000 kernels, instantiated.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>

__global__ void nothing() {}

int main(int argc, char** argv) {
  const int mode = argc > 1 ? std::atoi(argv[1]) : 0;
  if (cudaFree(nullptr) != cudaSuccess) return 1;
  void* p = nullptr;
  if (mode == 1) {
    cudaMalloc(&p, size_t(3) << 30);
    cudaMemset(p, 1, size_t(3) << 30);
  } else if (mode == 2) {
    for (int i = 0; i < 300; ++i) {
      cudaMalloc(&p, size_t(10) << 20);
      cudaMemset(p, 1, size_t(10) << 20);
    }
  } else if (mode == 3) {
    cudaHostAlloc(&p, size_t(128) << 20, cudaHostAllocPortable);
  } else if (mode == 4) {
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaGraph_t g;
    cudaGraphExec_t e;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
    for (int i = 0; i < 1000; ++i) nothing<<<1, 32, 0, s>>>();
    cudaStreamEndCapture(s, &g);
    cudaGraphInstantiate(&e, g, 0);
    cudaGraphLaunch(e, s);
  }
  cudaDeviceSynchronize();
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  std::printf("%ld.%09ld\n", long(t.tv_sec), long(t.tv_nsec));
  std::fflush(stdout);
  std::_Exit(0);
}

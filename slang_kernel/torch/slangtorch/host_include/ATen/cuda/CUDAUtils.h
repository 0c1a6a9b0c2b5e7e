// slang-kernel: stands in for PyTorch's ATen/cuda/CUDAUtils.h in Slang's torch-binding code (see torch_host.h).
#pragma once
#include "torch_host.h"

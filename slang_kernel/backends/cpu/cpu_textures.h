// Textures and samplers for Slang's C++ target, replacing the prelude's abstract ITexture /
// IRWTexture (virtual interfaces the host would have to construct inside the kernel's process) by
// plain data the host writes into the parameter block: a texel array in (shared) memory, its size
// and texel layout. _cpu_textures.py puts this text in place of those two structs.
// Texels are stored as the kernel's texel type (RWTexture2D<float> -> one float, float4 -> four):
// RW subscripts return a reference into that array. One mip level; out-of-range loads read zero,
// out-of-range stores go to a scratch texel (as on GPUs). Sample/SampleLevel: bilinear/trilinear
// (or nearest) filtering with wrap or clamp addressing, per the SamplerState.
struct ISamplerState
{
    uint32_t filter;    // 0 linear, 1 point
    uint32_t address;   // 0 wrap, 1 clamp
};

struct ITexture
{
    unsigned char* data;
    uint32_t width, height, depth;
    uint32_t dims;          // 1, 2 or 3 coordinates
    uint32_t texelBytes;    // bytes per texel
    uint32_t channels;
    uint32_t scalar;        // 0 float32, 1 int32, 2 uint32
    uint32_t layered;       // 1: an array texture, its last coordinate the layer (not filtered)

    TextureDimensions GetDimensions(int mipLevel = -1)
    {
        TextureDimensions d;
        d.reset();
        d.shape = layered ? ((dims - 1) | 0x40) : dims;
        d.width = width;
        d.height = dims > 1 ? height : 0;
        d.depth = dims > 2 ? depth : 0;
        if (layered) {
            d.arrayElementCount = dims == 2 ? height : depth;
            if (dims == 2) d.height = 0; else d.depth = 0;
        }
        d.numberOfLevels = 1;
        return d;
    }
    bool inside(const int32_t* v) const
    {
        if (v[0] < 0 || (uint32_t)v[0] >= width) return false;
        if (dims > 1 && (v[1] < 0 || (uint32_t)v[1] >= height)) return false;
        if (dims > 2 && (v[2] < 0 || (uint32_t)v[2] >= depth)) return false;
        return true;
    }
    unsigned char* at(uint32_t x, uint32_t y, uint32_t z) const
    {
        return data + (((size_t)z * height + y) * width + x) * texelBytes;
    }
    void Load(const int32_t* v, void* outData, size_t dataSize)
    {
        memset(outData, 0, dataSize);
        if (!inside(v)) return;
        memcpy(outData, at(v[0], dims > 1 ? v[1] : 0, dims > 2 ? v[2] : 0),
               dataSize < texelBytes ? dataSize : texelBytes);
    }
    static int32_t wrapIndex(int32_t i, uint32_t n, uint32_t address)
    {
        if (address == 1) return i < 0 ? 0 : (i >= (int32_t)n ? (int32_t)n - 1 : i);
        int32_t m = i % (int32_t)n;
        return m < 0 ? m + (int32_t)n : m;
    }
    void fetchFloat(int32_t x, int32_t y, int32_t z, uint32_t address, float w, float* acc, size_t n)
    {
        x = wrapIndex(x, width, address);
        y = dims > 1 ? wrapIndex(y, height, address) : 0;
        z = dims > 2 ? wrapIndex(z, depth, address) : 0;
        const unsigned char* p = at(x, y, z);
        for (size_t c = 0; c < n && c < channels; c++) {
            float f;
            if (scalar == 0) memcpy(&f, p + 4 * c, 4);
            else if (scalar == 1) { int32_t i; memcpy(&i, p + 4 * c, 4); f = (float)i; }
            else { uint32_t u; memcpy(&u, p + 4 * c, 4); f = (float)u; }
            acc[c] += w * f;
        }
    }
    void Sample(SamplerState samplerState, const float* loc, void* outData, size_t dataSize)
    {
        float acc[4] = {0, 0, 0, 0};
        size_t n = dataSize / 4 < 4 ? dataSize / 4 : 4;
        const ISamplerState* s = samplerState.state;
        uint32_t filter = s ? s->filter : 0, address = s ? s->address : 0;
        float size[3] = {(float)width, (float)height, (float)depth};
        int32_t base[3] = {0, 0, 0};
        float frac[3] = {0, 0, 0};
        uint32_t fdims = layered ? dims - 1 : dims;   // the layer is picked, not filtered
        if (layered) {
            int32_t n = (int32_t)(dims == 2 ? height : depth);
            int32_t layer = (int32_t)floorf(loc[dims - 1] + 0.5f);
            base[dims - 1] = layer < 0 ? 0 : (layer >= n ? n - 1 : layer);
        }
        for (uint32_t i = 0; i < fdims; i++) {
            float t = loc[i] * size[i];
            if (filter == 1) { base[i] = (int32_t)floorf(t); continue; }
            t -= 0.5f;
            float f = floorf(t);
            base[i] = (int32_t)f;
            frac[i] = t - f;
        }
        if (filter == 1) {
            fetchFloat(base[0], base[1], base[2], address, 1.0f, acc, n);
        } else {
            for (uint32_t corner = 0; corner < (1u << fdims); corner++) {
                float w = 1.0f;
                int32_t c[3] = {base[0], base[1], base[2]};
                for (uint32_t i = 0; i < fdims; i++) {
                    bool hi = (corner >> i) & 1;
                    w *= hi ? frac[i] : 1.0f - frac[i];
                    c[i] += hi;
                }
                if (w != 0.0f) fetchFloat(c[0], c[1], c[2], address, w, acc, n);
            }
        }
        memset(outData, 0, dataSize);
        memcpy(outData, acc, n * 4);
    }
    void SampleLevel(SamplerState samplerState, const float* loc, float level, void* outData, size_t dataSize)
    {
        Sample(samplerState, loc, outData, dataSize);
    }
};

struct IRWTexture : ITexture
{
    /// Get the reference to the element at loc (a scratch texel outside the texture).
    void* refAt(const uint32_t* loc)
    {
        static thread_local uint64_t scratch[8];
        int32_t v[3] = {(int32_t)loc[0], dims > 1 ? (int32_t)loc[1] : 0, dims > 2 ? (int32_t)loc[2] : 0};
        if (!inside(v)) { memset(scratch, 0, sizeof(scratch)); return scratch; }
        return at(v[0], v[1], v[2]);
    }
};

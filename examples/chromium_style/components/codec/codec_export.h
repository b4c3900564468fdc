// CODEC_EXPORT marks the API of the libcodec.so component. Everything else in
// the library (including the copies of //base and //third_party/tinylz linked
// into it) is compiled with -fvisibility=hidden and stays internal.

#ifndef COMPONENTS_CODEC_CODEC_EXPORT_H_
#define COMPONENTS_CODEC_CODEC_EXPORT_H_

#if defined(CODEC_IMPLEMENTATION)
#define CODEC_EXPORT __attribute__((visibility("default")))
#else
#define CODEC_EXPORT
#endif

#endif  // COMPONENTS_CODEC_CODEC_EXPORT_H_

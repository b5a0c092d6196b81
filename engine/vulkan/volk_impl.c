/* volk (the Vulkan meta-loader, libvulkan-volk-dev) compiled once into the engine: it
   opens libvulkan.so.1 at run time, so the engine starts without it. */
#include <volk.c>

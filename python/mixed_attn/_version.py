# The release version without the local tag. The wheel's full version (PEP 440 local part
# +cu130torch2.11, +rocm6.3torch2.11, +cputorch2.13) is added at build time by
# tools/wheel_version.py; mixed_attn.__version__ reads it back from the installed metadata.
BASE_VERSION = "0.1.0"

// Exists so that CMake has a target to build the shared torch PCH on.

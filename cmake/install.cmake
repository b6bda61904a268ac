# Installation rules (header, libraries, pkg-config, CMake package).

# The installed package: libraries, public headers, the `sluice` program
# (tools/CMakeLists.txt), SluiceConfig.cmake with the exported targets, and
# sluice.pc for pkg-config. Included by the top-level CMakeLists.txt after
# every library target exists. docs/decisions/0032-installable-package.md.
include(CMakePackageConfigHelpers)

# In-tree target -> exported name (Sluice::<name>). In-tree code keeps using
# the target names; Sluice::<name> aliases work in the tree too, so a host
# that adds Sluice with add_subdirectory() links the same names.
set(SLUICE_EXPORTED_LIBRARIES
  sluice_engine sluice
  sluice_url url
  sluice_memory memory
  sluice_sqlite sqlite
  sluice_postgres postgres
  sluice_backends backends)
# While the major version is 0, a minor release may break what
# docs/compatibility.md calls stable, so the soname carries major.minor.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(SLUICE_SOVERSION "${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}")
  set(SLUICE_VERSION_COMPATIBILITY SameMinorVersion)
else()
  set(SLUICE_SOVERSION "${PROJECT_VERSION_MAJOR}")
  set(SLUICE_VERSION_COMPATIBILITY SameMajorVersion)
endif()

set(SLUICE_INSTALLED_TARGETS "")
set(SLUICE_PC_LIBS "")
list(LENGTH SLUICE_EXPORTED_LIBRARIES n)
math(EXPR last "${n} - 1")
foreach(i RANGE 0 ${last} 2)
  math(EXPR j "${i} + 1")
  list(GET SLUICE_EXPORTED_LIBRARIES ${i} target)
  list(GET SLUICE_EXPORTED_LIBRARIES ${j} name)
  add_library(Sluice::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES
    EXPORT_NAME ${name}
    VERSION "${PROJECT_VERSION}"
    SOVERSION "${SLUICE_SOVERSION}")
  list(APPEND SLUICE_INSTALLED_TARGETS ${target})
  # Dependents before their dependencies, for static linking.
  list(PREPEND SLUICE_PC_LIBS "-l${target}")
endforeach()

install(TARGETS ${SLUICE_INSTALLED_TARGETS}
  EXPORT SluiceTargets
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}"
  INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")

# Public headers: engine/include/sluice/*.h, backends/include/sluice/*.h, the
# generated version.h, and the internal headers those include (found by
# following their #include "sluice/internal/..." lines), and no others.
file(GLOB SLUICE_PUBLIC_HEADERS CONFIGURE_DEPENDS
     "${PROJECT_SOURCE_DIR}/engine/include/sluice/*.h"
     "${PROJECT_SOURCE_DIR}/backends/include/sluice/*.h")
set(SLUICE_INTERNAL_HEADERS "")
set(pending ${SLUICE_PUBLIC_HEADERS})
while(pending)
  list(POP_FRONT pending header)
  file(STRINGS "${header}" lines REGEX "^#include \"sluice/internal/[^\"]+\"")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^#include \"sluice/internal/([^\"]+)\".*" "\\1"
           name "${line}")
    set(internal "${PROJECT_SOURCE_DIR}/engine/include/sluice/internal/${name}")
    if(NOT EXISTS "${internal}")
      message(FATAL_ERROR "${header} includes sluice/internal/${name}, "
                          "which is not in engine/include/sluice/internal")
    endif()
    if(NOT internal IN_LIST SLUICE_INTERNAL_HEADERS)
      list(APPEND SLUICE_INTERNAL_HEADERS "${internal}")
      list(APPEND pending "${internal}")
    endif()
  endforeach()
endwhile()
install(FILES ${SLUICE_PUBLIC_HEADERS}
              "${PROJECT_BINARY_DIR}/generated/include/sluice/version.h"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/sluice")
if(SLUICE_INTERNAL_HEADERS)
  install(FILES ${SLUICE_INTERNAL_HEADERS}
          DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/sluice/internal")
endif()

# SluiceConfig.cmake, SluiceConfigVersion.cmake, SluiceTargets.cmake.
set(SLUICE_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/Sluice")
install(EXPORT SluiceTargets
  NAMESPACE Sluice::
  DESTINATION "${SLUICE_CMAKE_DIR}")
configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/SluiceConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/SluiceConfig.cmake"
  INSTALL_DESTINATION "${SLUICE_CMAKE_DIR}")
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/SluiceConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY ${SLUICE_VERSION_COMPATIBILITY})
install(FILES "${PROJECT_BINARY_DIR}/SluiceConfig.cmake"
              "${PROJECT_BINARY_DIR}/SluiceConfigVersion.cmake"
        DESTINATION "${SLUICE_CMAKE_DIR}")

# sluice.pc. Its prefix is found from where the file lies, so the package can
# be installed with `cmake --install --prefix DIR` and moved. Abseil and
# Boost.JSON are part of the public headers, so they are always required;
# SQLite and libpq only for linking the static libraries.
set(SLUICE_PC_ABSL absl_status absl_statusor absl_strings absl_str_format
    absl_time absl_synchronization absl_flat_hash_map absl_flat_hash_set
    absl_random_random absl_cord absl_span absl_btree absl_inlined_vector)
list(JOIN SLUICE_PC_ABSL " " SLUICE_PC_REQUIRES)
list(JOIN SLUICE_PC_LIBS " " SLUICE_PC_LIBS)
set(SLUICE_PC_LIBS "${SLUICE_PC_LIBS} -lboost_json -pthread")
if(BUILD_SHARED_LIBS)
  set(SLUICE_PC_REQUIRES_PRIVATE "sqlite3 libpq")
else()
  string(APPEND SLUICE_PC_REQUIRES " sqlite3 libpq")
  set(SLUICE_PC_REQUIRES_PRIVATE "")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  message(FATAL_ERROR "sluice.pc needs a relative CMAKE_INSTALL_LIBDIR")
endif()
file(RELATIVE_PATH SLUICE_PC_PREFIX_FROM_PCDIR
     "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" SLUICE_PC_PREFIX_FROM_PCDIR
       "${SLUICE_PC_PREFIX_FROM_PCDIR}")
configure_file("${PROJECT_SOURCE_DIR}/cmake/sluice.pc.in"
               "${PROJECT_BINARY_DIR}/sluice.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/sluice.pc"
        DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")

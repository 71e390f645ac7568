# Installation and the two ways a consumer finds shoal: the exported CMake
# package (find_package(shoal) -> shoal::shoal, shoal::shoal_static) and
# pkg-config (shoal.pc).  Included last by the top-level CMakeLists.txt, so
# every target below already exists.
include(CMakePackageConfigHelpers)

set(SHOAL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/shoal)

# A sanitized libshoal needs the sanitizer runtime in every program that
# links it; say so in the installed interface so consumers link it too (in
# the build tree add_link_options already does).
if(SHOAL_SANITIZE)
  foreach(t shoal shoal_static)
    target_link_options(${t} INTERFACE $<INSTALL_INTERFACE:-fsanitize=${SHOAL_SANITIZE}>)
  endforeach()
  set(SHOAL_PC_LIBS_EXTRA " -fsanitize=${SHOAL_SANITIZE}")
endif()

# Both libraries are built from the layers' $<TARGET_OBJECTS:...> rather than
# by linking the object library, so no layer's object library nor the in-tree
# shoal_internal is part of their link interface and neither is exported.
install(TARGETS shoal shoal_static EXPORT shoalTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})

# shoal.h plus any header a later layer adds under include/shoal/.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

install(EXPORT shoalTargets NAMESPACE shoal:: DESTINATION ${SHOAL_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/shoalConfig.cmake.in
  ${PROJECT_BINARY_DIR}/shoalConfig.cmake
  INSTALL_DESTINATION ${SHOAL_CMAKE_DIR})
# 0.x releases may break the API between minor versions.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/shoalConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/shoalConfig.cmake ${PROJECT_BINARY_DIR}/shoalConfigVersion.cmake
  DESTINATION ${SHOAL_CMAKE_DIR})

# pkg-config paths are relative to the .pc file itself, so the installed
# tree stays correct when `cmake --install --prefix` or DESTDIR moves it
# away from the configured CMAKE_INSTALL_PREFIX.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(SHOAL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(SHOAL_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(SHOAL_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  file(RELATIVE_PATH SHOAL_PC_UP /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
  string(REGEX REPLACE "/$" "" SHOAL_PC_UP "${SHOAL_PC_UP}")
  set(SHOAL_PC_PREFIX "\${pcfiledir}/${SHOAL_PC_UP}")
  set(SHOAL_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(SHOAL_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
# A static link needs the optional libraries built in (libpmix, libfabric):
# their flags, not Requires.private, as pmix.pc is often off the search path.
list(JOIN SHOAL_PKG_LDFLAGS " " SHOAL_PC_LIBS_PRIVATE_EXTRA)
if(SHOAL_PC_LIBS_PRIVATE_EXTRA)
  string(PREPEND SHOAL_PC_LIBS_PRIVATE_EXTRA " ")
endif()
# A program linked from a prefix outside the loader's directories (~/.local,
# /opt/...) should run without LD_LIBRARY_PATH, so there shoal.pc adds the
# library directory as a run path; in a system directory it must not (Debian
# policy).  The prefix is known only at install time (--prefix, DESTDIR), so
# both variants are configured and the install picks one.
set(SHOAL_PC_RPATH "")
configure_file(${CMAKE_CURRENT_LIST_DIR}/shoal.pc.in ${PROJECT_BINARY_DIR}/pc-system/shoal.pc @ONLY)
set(SHOAL_PC_RPATH " -Wl,-rpath,\${libdir}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/shoal.pc.in ${PROJECT_BINARY_DIR}/pc-rpath/shoal.pc @ONLY)
set(SHOAL_LOADER_DIRS ${CMAKE_C_IMPLICIT_LINK_DIRECTORIES} /lib /usr/lib /lib64 /usr/lib64)
install(CODE "
  get_filename_component(shoal_libdir \"${CMAKE_INSTALL_LIBDIR}\" ABSOLUTE BASE_DIR \"\${CMAKE_INSTALL_PREFIX}\")
  set(shoal_loader_dirs [[${SHOAL_LOADER_DIRS}]])
  list(FIND shoal_loader_dirs \"\${shoal_libdir}\" shoal_at)
  set(shoal_pc pc-system)
  if(shoal_at EQUAL -1)
    set(shoal_pc pc-rpath)
  endif()
  file(INSTALL DESTINATION \"\$ENV{DESTDIR}\${shoal_libdir}/pkgconfig\" TYPE FILE
       FILES \"${PROJECT_BINARY_DIR}/\${shoal_pc}/shoal.pc\")
")

# Manual pages, the documentation and the example programs (with the
# CMakeLists.txt that builds them against this installed package).
install(FILES ${PROJECT_SOURCE_DIR}/man/shoalrun.1 ${PROJECT_SOURCE_DIR}/man/shoal-info.1 ${PROJECT_SOURCE_DIR}/man/shoal-cosmos.1
  DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${PROJECT_SOURCE_DIR}/man/shoal.7 DESTINATION ${CMAKE_INSTALL_MANDIR}/man7)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs) # as README.md links them
install(DIRECTORY ${PROJECT_SOURCE_DIR}/apps/ DESTINATION ${CMAKE_INSTALL_DATADIR}/shoal/examples
  FILES_MATCHING PATTERN "*.c" PATTERN "*.h" PATTERN "CMakeLists.txt")

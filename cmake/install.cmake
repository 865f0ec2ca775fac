# `cmake --install build [--prefix P]`: the programs and their companion names, libquantpack
# (shared with SONAME, and static), the public headers, quantpack.pc, the CMake package
# quantpack::quantpack, man pages generated from --help, bash and zsh completion (README
# "Install"; tests/e2e/test_install.sh installs into a temporary prefix and builds against it).
include(CMakePackageConfigHelpers)
set(QP_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/quantpack)
set(QP_BASH_COMPLETION_DIR ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)

# A link named `name` to `target` in the installed folder `dir` (relative to the prefix).
function(qp_install_link dir target name)
  install(CODE "set(link \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${dir}/${name}\")
    message(STATUS \"Installing: \${link} -> ${target}\")
    file(CREATE_LINK ${target} \"\${link}\" SYMBOLIC)")
endfunction()

install(TARGETS quantpack RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET qp-gen-fixtures)
  install(TARGETS qp-gen-fixtures RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
foreach(alias ${QP_COMPANIONS})
  qp_install_link(${CMAKE_INSTALL_BINDIR} quantpack ${alias})
endforeach()

install(TARGETS quantpack_shared quantpack_lib EXPORT quantpackTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/quantpack DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")

# CMake package: find_package(quantpack) -> quantpack::quantpack (shared) and
# quantpack::quantpack_static (its dependencies in INTERFACE_LINK_LIBRARIES).
install(EXPORT quantpackTargets NAMESPACE quantpack:: DESTINATION ${QP_CMAKE_DIR})
configure_package_config_file(cmake/quantpackConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/quantpackConfig.cmake
                              INSTALL_DESTINATION ${QP_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/quantpackConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/quantpackConfig.cmake
              ${CMAKE_BINARY_DIR}/quantpackConfigVersion.cmake DESTINATION ${QP_CMAKE_DIR})

# pkg-config: prefix relative to the .pc file, so a copy installed with --prefix P is right.
file(RELATIVE_PATH QP_PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
string(REGEX REPLACE "/$" "" QP_PC_TO_PREFIX "${QP_PC_TO_PREFIX}")
configure_file(cmake/quantpack.pc.in ${CMAKE_BINARY_DIR}/quantpack.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/quantpack.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Man pages: one per command name and per quantpack command, from their --help at build time.
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/man/quantpack.1
  COMMAND bash ${CMAKE_SOURCE_DIR}/cli/gen_man.sh ${CMAKE_BINARY_DIR}/bin ${CMAKE_BINARY_DIR}/man
  DEPENDS quantpack qp-gen-fixtures ${CMAKE_SOURCE_DIR}/cli/gen_man.sh
  COMMENT "Man pages from --help")
add_custom_target(quantpack_man ALL DEPENDS ${CMAKE_BINARY_DIR}/man/quantpack.1)
install(DIRECTORY ${CMAKE_BINARY_DIR}/man/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
        FILES_MATCHING PATTERN "*.1")

# Completion: bash-completion loads a file named after the command, so each name links to one.
install(FILES cli/completions/quantpack.bash DESTINATION ${QP_BASH_COMPLETION_DIR}
        RENAME quantpack)
foreach(alias ${QP_COMPANIONS} qp-gen-fixtures)
  qp_install_link(${QP_BASH_COMPLETION_DIR} quantpack ${alias})
endforeach()
install(FILES cli/completions/_quantpack DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/site-functions)

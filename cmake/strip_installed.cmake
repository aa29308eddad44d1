# Run by `cmake --install` for each program and library it installs
# (actorflow_strip_installed in CMakeLists.txt): drops the debug info of
# `file` (a RelWithDebInfo program is ~140 MB, ~10 MB without it) or, with
# `split` true, moves a program's into <its dir>/.debug/<name>.debug,
# compressed, where gdb finds it through the .gnu_debuglink it leaves.
# Inputs: file, kind (EXECUTABLE or STATIC_LIBRARY), objcopy, split.
if(NOT EXISTS "${file}")
  return()
endif()
if(kind STREQUAL "EXECUTABLE" AND split)
  get_filename_component(dir "${file}" DIRECTORY)
  get_filename_component(name "${file}" NAME)
  file(MAKE_DIRECTORY "${dir}/.debug")
  set(debug "${dir}/.debug/${name}.debug")
  execute_process(COMMAND "${objcopy}" --only-keep-debug
                          --compress-debug-sections=zlib "${file}" "${debug}"
                  RESULT_VARIABLE failed)
  if(NOT failed)
    execute_process(COMMAND "${objcopy}" --strip-debug
                            "--add-gnu-debuglink=${debug}" "${file}"
                    RESULT_VARIABLE failed)
  endif()
elseif(kind STREQUAL "EXECUTABLE" OR NOT split)
  execute_process(COMMAND "${objcopy}" --strip-debug "${file}"
                  RESULT_VARIABLE failed)
endif()
if(failed)
  message(FATAL_ERROR "could not strip the debug info of ${file}: ${failed}")
endif()

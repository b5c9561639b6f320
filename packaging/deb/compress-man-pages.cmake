# CPACK_PRE_BUILD_SCRIPTS of cmake/HcPackaging.cmake: runs after CPack has installed each
# component into its staging folder, before it archives them. Debian's policy wants manual
# pages compressed with gzip -9n (no name or time stamp in the header, so builds reproduce).
file(GLOB_RECURSE _pages LIST_DIRECTORIES false "${CPACK_TEMPORARY_DIRECTORY}/*.[0-9]")
list(FILTER _pages INCLUDE REGEX "/share/man/man[0-9]/[^/]+$")
foreach(page IN LISTS _pages)
  execute_process(COMMAND gzip -9nf "${page}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gzip failed on ${page}")
  endif()
endforeach()

# Warnings and sanitizers shared by every target of the project.
add_compile_options(-Wall -Wextra -Wno-missing-field-initializers)
if(HC_SANITIZE)
  add_compile_options(-fsanitize=${HC_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${HC_SANITIZE})
endif()

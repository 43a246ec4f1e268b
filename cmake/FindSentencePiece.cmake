# Finds libsentencepiece (the runtime library; the trainer is not needed) and defines the imported
# target SentencePiece::SentencePiece. Installed with the package so that consumers of the static
# library find it too.
find_path(SentencePiece_INCLUDE_DIR sentencepiece_processor.h)
find_library(SentencePiece_LIBRARY sentencepiece)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(SentencePiece REQUIRED_VARS SentencePiece_LIBRARY SentencePiece_INCLUDE_DIR)

if(SentencePiece_FOUND AND NOT TARGET SentencePiece::SentencePiece)
  add_library(SentencePiece::SentencePiece UNKNOWN IMPORTED)
  set_target_properties(SentencePiece::SentencePiece PROPERTIES
    IMPORTED_LOCATION "${SentencePiece_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${SentencePiece_INCLUDE_DIR}")
endif()
mark_as_advanced(SentencePiece_INCLUDE_DIR SentencePiece_LIBRARY)

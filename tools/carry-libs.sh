# Sourced by the tools that pack a carry for the GPU machine: copy_carry_libs
# DEST FILE... copies into DEST the shared libraries FILE... need that the
# device image lacks (it has CUDA, not our Debian packages).
copy_carry_libs() {
  local dest=$1
  shift
  for lib in $(ldd "$@" | awk '/=> \// {print $3}' | sort -u); do
    case "$(basename "$lib")" in
      libmimalloc*|libgomp*|libpcre2*|libutf8proc*|libcpp-httplib*|libbrotli*) cp -L "$lib" "$dest/" ;;
    esac
  done
}

package vegas

// #include <stdlib.h>
// #include <string.h>
// #include <stdint.h>
import "C"

import "unsafe"

// cArena collects C allocations for one call: structs handed to C may not hold
// Go pointers, so everything a request points to lives in C memory until free.
type cArena struct{ ptrs []unsafe.Pointer }

func (a *cArena) alloc(size uintptr) unsafe.Pointer {
	p := C.calloc(1, C.size_t(size))
	if p == nil {
		panic("vegas: out of C memory")
	}
	a.ptrs = append(a.ptrs, p)
	return p
}

func (a *cArena) int32s(v []int32) *C.int32_t {
	if len(v) == 0 {
		return nil
	}
	p := a.alloc(uintptr(len(v)) * 4)
	C.memcpy(p, unsafe.Pointer(&v[0]), C.size_t(len(v)*4))
	return (*C.int32_t)(p)
}

func (a *cArena) cstring(s string) *C.char {
	p := C.CString(s)
	a.ptrs = append(a.ptrs, unsafe.Pointer(p))
	return p
}

// cstrings is a char*[] of NUL-terminated copies of ss.
func (a *cArena) cstrings(ss []string) **C.char {
	if len(ss) == 0 {
		return nil
	}
	arr := (*[1 << 28]*C.char)(a.alloc(uintptr(len(ss)) * unsafe.Sizeof((*C.char)(nil))))[:len(ss):len(ss)]
	for i, s := range ss {
		arr[i] = a.cstring(s)
	}
	return &arr[0]
}

func (a *cArena) free() {
	for _, p := range a.ptrs {
		C.free(p)
	}
	a.ptrs = nil
}

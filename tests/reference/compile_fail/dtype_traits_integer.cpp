// Must NOT compile (ctest dtype_traits_rejects_integers expects the static_assert's message):
// DTypeTraits has no specialisation for the index types, its primary template rejects them.
#include "tbe/dtype_traits.h"

int main() { return tbe::DTypeTraits<tbe::DType::I32>::digits; }

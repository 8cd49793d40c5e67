// Which implicit composite the dispatcher is running the parts of (the
// outermost one: cross_entropy for the nll_loss it calls). A capture records it
// per operator so that a compiled call's error can name the function the user
// called, as the eager binding does ("cross_entropy: ... (in nll_loss)").
#pragma once

namespace tp {

// The outermost composite running on this thread, or nullptr.
const char* current_composite();

}  // namespace tp

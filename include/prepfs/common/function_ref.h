// A non-owning reference to a callable, for callbacks that run before the call that takes them
// returns (a cache fill, a visitor). Unlike std::function it never allocates and has no manager
// to copy or destroy the callable: on the read path, a std::function per chunk lookup cost more
// instructions than the RAM tier's own lookup.
#pragma once

#include <type_traits>
#include <utility>

namespace prepfs {

template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
  FunctionRef(F&& f) noexcept  // NOLINT(google-explicit-constructor): used like a function parameter
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))), call_([](void* obj, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(obj))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(obj_, std::forward<Args>(args)...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

}  // namespace prepfs

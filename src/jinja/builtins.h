// Filters, tests and methods of strings and maps that chat templates use.
//   filters: abs capitalize count d default first float int items join last length list lower
//            map reject rejectattr replace reverse safe select selectattr string title tojson
//            trim unique upper
//   tests:   boolean callable defined divisibleby eq equalto even false float ge gt in integer
//            iterable le lower lt mapping ne none number odd sameas sequence string true
//            undefined upper (and == != < <= > >=)
//   str:     capitalize count endswith find join lower lstrip replace rsplit rstrip split
//            startswith strip title upper
//   dict:    get items keys values
#pragma once

#include "jinja/operators.h"

#include <optional>
#include <string>
#include <vector>

namespace huddle::jinja {

// value | name(args, kwargs). TemplateError (kRender) for an unknown filter or bad arguments.
Value call_filter(const std::string& name, const Value& value, const std::vector<Value>& args,
                  const KeywordArgs& kwargs, Position at, Budget& budget);
// value is name(args). TemplateError (kRender) for an unknown test.
bool call_test(const std::string& name, const Value& value, const std::vector<Value>& args,
               Position at);
// object.name(args, kwargs) for str and dict methods; nullopt when `object` has no such method.
std::optional<Value> call_method(const Value& object, const std::string& name,
                                 const std::vector<Value>& args, const KeywordArgs& kwargs,
                                 Position at, Budget& budget);

}  // namespace huddle::jinja

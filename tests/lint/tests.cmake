# Rules the compiler does not check by itself (tests/lint/*.py).
find_package(Python3 COMPONENTS Interpreter REQUIRED)
add_test(NAME lint.collective_switches
  COMMAND Python3::Interpreter ${CMAKE_CURRENT_LIST_DIR}/collective_switches.py
    ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tools ${CMAKE_SOURCE_DIR}/include
    ${CMAKE_SOURCE_DIR}/tests)
add_test(NAME lint.collective_switches_self_test
  COMMAND Python3::Interpreter ${CMAKE_CURRENT_LIST_DIR}/collective_switches.py --self-test)
set_tests_properties(lint.collective_switches lint.collective_switches_self_test
  PROPERTIES LABELS lint TIMEOUT 60)

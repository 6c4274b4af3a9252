# The deployment examples (examples/Dockerfile, docker-compose.yml, k8s/):
# tests/unit/examples/test_examples_yaml.c (registered by the unit glob as
# unit_test_examples_yaml) parses them with libyaml and checks the fields
# Kubernetes, KEDA and Compose require. examples/service_inline_limiter.c runs
# in tests/integration/examples_inline_limiter.c (the integration glob).
pkg_check_modules(YAML REQUIRED IMPORTED_TARGET yaml-0.1)
target_link_libraries(unit_test_examples_yaml PRIVATE PkgConfig::YAML)

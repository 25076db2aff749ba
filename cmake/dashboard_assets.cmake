# salamander_dashboard_assets(OUT): the rule that writes OUT, a C++ source
# holding the dashboard's page, script and style (apps/dashboard/web/) and
# Debian's chart.js as string literals (cmake/embed_assets.cmake does the
# writing), for the main build and the fuzz build alike.
function(salamander_dashboard_assets out)
  find_file(CHART_JS chart.min.js PATHS /usr/share/javascript/chart.js NO_DEFAULT_PATH)
  if(NOT CHART_JS)
    message(FATAL_ERROR "chart.js not found: install Debian's libjs-chart.js "
                        "(deploy/install-deps.sh)")
  endif()
  set(web ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../apps/dashboard/web)
  set(script ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/embed_assets.cmake)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DNAMES=page,script,style,chart
            -Dpage=${web}/index.html -Dscript=${web}/app.js -Dstyle=${web}/app.css
            -Dchart=${CHART_JS} -P ${script}
    DEPENDS ${web}/index.html ${web}/app.js ${web}/app.css ${CHART_JS} ${script}
    COMMENT "embedding the dashboard's page and chart.js")
endfunction()

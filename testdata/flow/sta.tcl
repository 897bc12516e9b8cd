# OpenSTA: time the netlist Yosys wrote, setup and hold paths. One command
# per line: OpenSTA's shell evaluates each line alone.
read_liberty cells.lib
read_verilog netlist.v
link_design counter
create_clock -name clk -period 2.0 [get_ports clk]
set_input_delay 0.2 -clock clk [get_ports {rst en}]
set_output_delay 0.3 -clock clk [get_ports q*]
report_checks -path_delay max -fields {slew cap input_pins} -digits 3
report_checks -path_delay min -fields {slew cap input_pins} -digits 3

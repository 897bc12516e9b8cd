// A 4-bit counter with synchronous reset and enable: the design of the
// real-flow test (test/realtools/flow_test.go). Yosys maps it to cells.lib.
module counter (
    input  wire       clk,
    input  wire       rst,
    input  wire       en,
    output reg  [3:0] q
);
    always @(posedge clk)
        if (rst)
            q <= 4'd0;
        else if (en)
            q <= q + 4'd1;
endmodule

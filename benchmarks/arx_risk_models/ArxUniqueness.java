/*
 * ARX's population-uniqueness verdict for class-size histograms read from stdin, for explain.py
 * (beside this file): the estimate PopulationUniqueness.isFulfilled computes (Dankar:
 * getFractionOfUniqueTuplesDankar(false); otherwise getFractionOfUniqueTuples(model), default
 * ARXSolverConfiguration) and its acceptance rule (an estimate in (0, u], or 0 with no class of
 * size 1).
 *
 * Input lines:  <name> <zayatz|pitman|snb|dankar> <N> <u> <size>:<classes> ...
 * Output lines: <name> <estimate (Double.toString)> <fulfilled true|false>
 */
import java.util.Locale;
import java.util.Scanner;

import org.deidentifier.arx.ARXPopulationModel;
import org.deidentifier.arx.ARXSolverConfiguration;
import org.deidentifier.arx.risk.RiskModelHistogram;
import org.deidentifier.arx.risk.RiskModelPopulationUniqueness;
import org.deidentifier.arx.risk.RiskModelPopulationUniqueness.PopulationUniquenessModel;

import com.carrotsearch.hppc.IntIntOpenHashMap;

public class ArxUniqueness {

    public static void main(String[] args) {
        Locale.setDefault(Locale.ROOT);
        Scanner in = new Scanner(System.in);
        StringBuilder out = new StringBuilder();
        while (in.hasNextLine()) {
            String line = in.nextLine().trim();
            if (line.isEmpty()) continue;
            String[] f = line.split("\\s+");
            PopulationUniquenessModel model = PopulationUniquenessModel.valueOf(f[1].toUpperCase());
            long population = Long.parseLong(f[2]);
            double threshold = Double.parseDouble(f[3]);
            IntIntOpenHashMap histogram = new IntIntOpenHashMap();
            for (int i = 4; i < f.length; i++) {
                String[] sc = f[i].split(":");
                histogram.put(Integer.parseInt(sc[0]), Integer.parseInt(sc[1]));
            }
            boolean fulfilled;
            double estimate = 0d;
            if (histogram.isEmpty()) {
                fulfilled = true;  // all suppressed
            } else {
                RiskModelPopulationUniqueness risk = new RiskModelPopulationUniqueness(
                        ARXPopulationModel.create(population), new RiskModelHistogram(histogram),
                        ARXSolverConfiguration.create());
                estimate = model == PopulationUniquenessModel.DANKAR ? risk.getFractionOfUniqueTuplesDankar(false)
                                                                      : risk.getFractionOfUniqueTuples(model);
                fulfilled = (estimate > 0d && estimate <= threshold)
                            || (estimate == 0d && histogram.getOrDefault(1, 0) == 0);
            }
            out.append(f[0]).append(' ').append(Double.toString(estimate)).append(' ').append(fulfilled).append('\n');
        }
        System.out.print(out);
    }
}
